#!/usr/bin/env python3
"""Initial classifier heads against the frozen encoder: for each start (a PEFT adapter directory
or a leanback checkpoint directory), the size of w1 - w0 and the initial logit difference on a
GLUE task's training set (its mean over the examples, which is (w1 - w0) . mean pooled output,
its spread, and the share predicted as class 1). Two-label tasks.

    python tools/studies/lora/lora_head_stats.py --model DIR --task rte --data ../shared/data/glue/RTE START...
"""
import argparse
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from glue_twin import read_split  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--model", required=True, help="the pretrained encoder (Hugging Face directory)")
ap.add_argument("--task", required=True)
ap.add_argument("--data", required=True, help="the task's GLUE folder")
ap.add_argument("--max-seq-len", type=int, default=128)
ap.add_argument("starts", nargs="+")
args = ap.parse_args()
from transformers import BertModel, BertTokenizerFast  # noqa: E402

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
tok = BertTokenizerFast.from_pretrained(args.model)
enc_model = BertModel.from_pretrained(args.model).eval()
a, b, y = read_split(args.task, args.data, "train")
pooled = []
with torch.no_grad():
    for i in range(0, len(a), 64):
        enc = tok(a[i:i + 64], b[i:i + 64] if b[0] is not None else None, truncation="longest_first",
                  max_length=args.max_seq_len, padding=True, return_tensors="pt")
        pooled.append(enc_model(**enc).pooler_output)
P = torch.cat(pooled)
mu = P.mean(0)
print(f"{args.task} train: {len(P)} examples, |mean pooled| {mu.norm():.3f}, label 1 share {sum(y) / len(y):.3f}")
for s in args.starts:
    f = os.path.join(s, "adapter_model.safetensors")
    d = load_file(f if os.path.exists(f) else os.path.join(s, "model.safetensors"))
    w = next(v for k, v in d.items() if k.endswith("classifier.weight"))
    bias = next(v for k, v in d.items() if k.endswith("classifier.bias"))
    if w.shape[0] != 2:
        sys.exit(f"lora_head_stats: {s}: the head has {w.shape[0]} labels; two-label tasks only")
    diff = (P @ w.T + bias)
    diff = diff[:, 1] - diff[:, 0]
    print(f"{s}: |w1 - w0| {(w[1] - w[0]).norm():.4f}, logit difference mean {diff.mean():+.4f} "
          f"std {diff.std():.4f}, predicted class 1 {(diff > 0).float().mean():.2f}")
