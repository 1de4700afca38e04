#!/usr/bin/env python3
"""PyTorch + transformers twin of one MiniLM MRPC training step at full padding.

The twin of
    leanback plan configs/minilm_mrpc.json --memory --set data.padding=max_length --set model.skip_padding=false
(and its --checkpoint variant): BertForSequenceClassification from the config's pretrained
MiniLM directory (num_labels=2, fp32, train mode with the model's own dropout 0.1, the default
attention implementation, sdpa), one fixed batch of the first 32 MRPC training pairs in file
order, tokenized with BertTokenizerFast (longest-first truncation) and padded to max_length 128.
A step is forward with loss, backward, AdamW (the config's lr and weight decay) and
zero_grad(set_to_none=True), timed and printed by tools/bench/train_step_common.py (medians
over --iters timed steps after --warmup, one JSON line with the C++ bench's fields).

saved_bytes counts what the issue's table counts: the bytes autograd keeps for backward after
forward (saved_tensors_hooks, unique storages, parameters excluded). --checkpoint wraps each encoder layer in
torch.utils.checkpoint (use_reentrant=False), so only the layers' inputs stay saved.
--activation-memory-budget F compiles the model (torch.compile, inductor) with
torch._functorch.config.activation_memory_budget = F: PyTorch's own planner, which recomputes
what it chooses inside the compiled graph so that it saves about F of what it otherwise would
(1.0: save as the compiler does by default; 0.0: recompute all it can). The first steps pay the
compilation (minutes on a CPU; --warmup covers it). saved_bytes is not counted then (the
compiled graph's saved tensors are its own); activation_peak_bytes is.

    python3 -m venv /tmp/venv_torch && /tmp/venv_torch/bin/pip install torch transformers
    /tmp/venv_torch/bin/python tools/bench/minilm_step_torch.py [CONFIG] [--checkpoint] --iters 3 --json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step_common import parse_args, run  # noqa: E402  (imports torch)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import BertForSequenceClassification, BertTokenizerFast  # noqa: E402
from glue_twin import expand, read_split  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH, SEQ = 32, 128


def add_arguments(p):
    p.add_argument("config", nargs="?", default=os.path.join(ROOT, "configs/minilm_mrpc.json"))
    p.add_argument("--checkpoint", action="store_true", help="checkpoint each encoder layer")
    p.add_argument("--activation-memory-budget", type=float, metavar="F",
                   help="torch.compile the model with this activation_memory_budget (0..1)")
    p.add_argument("--no-dropout", action="store_true",
                   help="hidden and attention dropout 0 (what the compiled budget can recompute)")


def main():
    a = parse_args(__doc__, add_arguments)
    compiled = a.activation_memory_budget is not None
    if compiled and a.checkpoint:
        sys.exit("minilm_step_torch.py: --checkpoint and --activation-memory-budget are two anchors; pick one")
    cfg = json.load(open(a.config))
    model_dir = expand(cfg["model"]["pretrained"])
    data_dir = cfg["data"]["dir"]
    if not os.path.isabs(data_dir):  # relative to the repository root, as leanback reads it
        data_dir = os.path.join(ROOT, data_dir)

    sa, sb, labels = read_split("mrpc", data_dir, "train")
    tok = BertTokenizerFast.from_pretrained(model_dir)
    batch = dict(tok(sa[:BATCH], sb[:BATCH], truncation="longest_first", max_length=SEQ,
                     padding="max_length", return_tensors="pt"))
    y = torch.tensor(labels[:BATCH], dtype=torch.long)
    assert tuple(batch["input_ids"].shape) == (BATCH, SEQ)

    drop = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0} if a.no_dropout else {}
    model = BertForSequenceClassification.from_pretrained(model_dir, num_labels=2, dtype=torch.float32, **drop)
    if a.checkpoint:
        kw = {"use_reentrant": False}  # transformers >= 5.25 renamed gradient_ to activation_checkpointing
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kw)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    if compiled:
        from torch._functorch import config as functorch_config
        functorch_config.activation_memory_budget = a.activation_memory_budget
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["optimizer"].get("lr", 5e-5),
                            weight_decay=cfg["optimizer"].get("weight_decay", 0.0))
    return run("minilm_mrpc_step", a, model, opt, lambda: model(**batch, labels=y).loss,
               {"checkpoint": a.checkpoint, "activation_memory_budget": a.activation_memory_budget,
                "dropout": not a.no_dropout,
                "batch": {"B": BATCH, "T": SEQ}, "transformers": transformers.__version__},
               count_saved=not compiled)


if __name__ == "__main__":
    sys.exit(main())
