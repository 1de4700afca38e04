#!/usr/bin/env python3
"""PyPI twin of `leanback bench tokenize`: Hugging Face BertTokenizerFast (Rust tokenizers)
on the same sentences (SST-2 train.tsv, `sentence` column), single thread, ids without
special tokens. One JSON line per mode, with the C++ bench's fields:
  transformers_one_by_one  tok(s, add_special_tokens=False) per sentence (the Python API)
  tokenizers_one_by_one    the backend Tokenizer.encode(s, add_special_tokens=False)
  tokenizers_batch         Tokenizer.encode_batch(all sentences) on one Rayon thread
"tokens" counts wordpieces per pass (equal to ours when both tokenize alike); "ms" is the
median pass. Usage:
  $VENV_GOLD/bin/python tools/bench/tokenizer_hf.py [--vocab DIR|vocab.txt] [--tsv FILE] [--iters N]
"""
import os
import sys

# This file's name shadows the standard library's tokenize module (which inspect/linecache
# import), so its folder must not be on the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

# Before tokenizers is imported: one Rayon thread, no fork-parallelism.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import tokenizers  # noqa: E402
import transformers  # noqa: E402
from transformers import BertTokenizerFast  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))), "shared", "data")


def read_sentences(path):
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        col = header.index("sentence")
        return [line.rstrip("\n").split("\t")[col] for line in f if line.strip("\n")]


def load(vocab):
    if os.path.isdir(vocab):
        return BertTokenizerFast.from_pretrained(vocab)
    tmp = tempfile.mkdtemp(prefix="lb_tok_")  # from_pretrained wants a directory
    shutil.copy(vocab, os.path.join(tmp, "vocab.txt"))
    tok = BertTokenizerFast.from_pretrained(tmp)
    shutil.rmtree(tmp)
    return tok


def timed(run, iters):
    run()  # warm-up
    ms, tokens = [], 0
    for _ in range(iters):
        t0 = time.perf_counter()
        tokens = run()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", default=os.path.join(DATA, "bert-base-uncased"))
    ap.add_argument("--tsv", default=os.path.join(DATA, "glue", "SST-2", "train.tsv"))
    ap.add_argument("--iters", type=int, default=3)
    a = ap.parse_args()
    tok = load(a.vocab)
    backend = tok.backend_tokenizer
    texts = read_sentences(a.tsv)

    modes = {
        "transformers_one_by_one":
            lambda: sum(len(tok(s, add_special_tokens=False)["input_ids"]) for s in texts),
        "tokenizers_one_by_one":
            lambda: sum(len(backend.encode(s, add_special_tokens=False).ids) for s in texts),
        "tokenizers_batch":
            lambda: sum(len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)),
    }
    for mode, run in modes.items():
        ms, tokens = timed(run, a.iters)
        print(json.dumps({"workload": "tokenize", "mode": mode, "tokens_per_s": tokens / (ms / 1e3),
                          "texts": len(texts), "tokens": tokens, "ms": ms, "iters": a.iters,
                          "threads": 1, "tokenizers": tokenizers.__version__,
                          "transformers": transformers.__version__}), flush=True)


if __name__ == "__main__":
    main()
