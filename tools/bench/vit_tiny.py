#!/usr/bin/env python3
"""PyTorch twin of `leanback bench vit_tiny`: transformers ViTForImageClassification (depth 12,
dim 192, 3 heads, FFN 768, patch 4 on 32x32x3, 10 classes, no dropout), one fixed batch of 64
(--batch: configs/vit_tiny_cifar10.json trains with 128) N(0, 1) images, AdamW (lr 1e-4, weight decay 0.01); full training steps, medians per phase,
one JSON line with the C++ bench's fields.

Usage: python tools/bench/vit_tiny.py [--batch N] [--iters N] [--warmup N] [--threads N] [--json]
"""
import sys

import train_step_common as common
import torch


def main():
    a = common.parse_args(__doc__, lambda p: p.add_argument("--batch", type=int, default=64))
    from transformers import ViTConfig, ViTForImageClassification
    B = a.batch
    cfg = ViTConfig(image_size=32, patch_size=4, num_channels=3, hidden_size=192,
                    num_hidden_layers=12, num_attention_heads=3, intermediate_size=768,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=10)
    model = ViTForImageClassification(cfg)
    pixels = torch.randn(B, 3, 32, 32)
    labels = torch.randint(0, 10, (B,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    return common.run(
        "vit_tiny", a, model, opt, lambda: model(pixel_values=pixels, labels=labels).loss,
        {"model": {"layers": 12, "hidden": 192, "heads": 3, "ffn": 768, "patch": 4, "image": 32},
         "batch": {"B": B}, "optimizer": "adamw"})


if __name__ == "__main__":
    sys.exit(main())
