#!/usr/bin/env python3
"""PyTorch twin of `leanback bench bert_mini`: transformers BertForSequenceClassification (L=4,
H=256, 4 heads, FFN 1024, vocab 30522, dropout 0.1), one fixed batch of 32 x 128 random token
ids (attention mask all ones, 2 labels), AdamW (lr 1e-4, weight decay 0.01); full training
steps, medians per phase, one JSON line with the C++ bench's fields.

Usage: python tools/bench/bert_mini.py [--iters N] [--warmup N] [--threads N] [--json]
(e.g. $VENV_GOLD/bin/python: Debian's torch 1.13 + transformers 4.36; see
train_step_common.py for LB_BENCH_EXTRA_PATH with another torch).
"""
import sys

import train_step_common as common
import torch


def main():
    a = common.parse_args(__doc__)
    from transformers import BertConfig, BertForSequenceClassification
    B, T = 32, 128
    cfg = BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=1024, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1, num_labels=2)
    model = BertForSequenceClassification(cfg)
    ids = torch.randint(0, cfg.vocab_size, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    labels = torch.randint(0, 2, (B,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    return common.run(
        "bert_mini", a, model, opt,
        lambda: model(input_ids=ids, attention_mask=mask, labels=labels).loss,
        {"model": {"layers": 4, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 30522,
                   "dropout": 0.1},
         "batch": {"B": B, "T": T}, "optimizer": "adamw"})


if __name__ == "__main__":
    sys.exit(main())
