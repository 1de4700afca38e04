#!/usr/bin/env python3
"""PyTorch twin of `leanback bench bert_mini`: transformers BertForSequenceClassification (L=4,
H=256, 4 heads, FFN 1024, vocab 30522, dropout 0.1), one fixed batch of 32 x 128 random token
ids (attention mask all ones, 2 labels), AdamW (lr 1e-4, weight decay 0.01); full training
steps, medians per phase, one JSON line with the C++ bench's fields.

Usage: python tools/bench/bert_mini.py [--size mini|base] [--iters N] [--warmup N] [--threads N]
       [--device cpu|cuda] [--autocast] [--json]
(--size base is the twin of `leanback bench bert_base`: L=12, H=768, 12 heads, FFN 3072.)
(e.g. $VENV_GOLD/bin/python: Debian's torch 1.13 + transformers 4.36; see
train_step_common.py for LB_BENCH_EXTRA_PATH with another torch).
"""
import sys

import train_step_common as common
import torch


def main():
    size = "base" if "--size" in sys.argv and sys.argv[sys.argv.index("--size") + 1] == "base" else "mini"
    if "--size" in sys.argv:  # ours, not the shared harness's
        i = sys.argv.index("--size")
        del sys.argv[i:i + 2]
    a = common.parse_args(__doc__)
    from transformers import BertConfig, BertForSequenceClassification
    B, T = 32, 128
    L, H, heads, ffn = (12, 768, 12, 3072) if size == "base" else (4, 256, 4, 1024)
    cfg = BertConfig(vocab_size=30522, hidden_size=H, num_hidden_layers=L, num_attention_heads=heads,
                     intermediate_size=ffn, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1, num_labels=2)
    model = BertForSequenceClassification(cfg).to(a.device)
    ids = torch.randint(0, cfg.vocab_size, (B, T)).to(a.device)
    mask = torch.ones(B, T, dtype=torch.long).to(a.device)
    labels = torch.randint(0, 2, (B,)).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    return common.run(
        f"bert_{size}", a, model, opt,
        lambda: model(input_ids=ids, attention_mask=mask, labels=labels).loss,
        {"model": {"layers": L, "hidden": H, "heads": heads, "ffn": ffn, "vocab": 30522,
                   "dropout": 0.1},
         "batch": {"B": B, "T": T}, "optimizer": "adamw"})


if __name__ == "__main__":
    sys.exit(main())
