#!/usr/bin/env python3
"""Converts a PyTorch checkpoint (pytorch_model.bin, a pickled state_dict) to
model.safetensors in the same directory, for users who only have the .bin.

Usage: python3 tools/convert_bin_to_safetensors.py MODEL_DIR [--out FILE]
Needs PyTorch. Refuses to overwrite an existing output file.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden"))
from common import save  # noqa: E402  (our dependency-free safetensors writer)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("--out", default=None, help="output file (default MODEL_DIR/model.safetensors)")
    args = ap.parse_args()
    src = os.path.join(args.model_dir, "pytorch_model.bin")
    out = args.out or os.path.join(args.model_dir, "model.safetensors")
    if not os.path.exists(src):
        sys.exit(f"error: {src} not found")
    if os.path.exists(out):
        sys.exit(f"error: {out} exists; not overwriting it")
    state = torch.load(src, map_location="cpu")
    if not isinstance(state, dict):
        sys.exit(f"error: {src} does not hold a state_dict (got {type(state).__name__})")
    tensors = {}
    for k, v in state.items():
        if not torch.is_tensor(v):
            sys.exit(f"error: entry {k!r} is not a tensor")
        tensors[k] = v.contiguous()  # shared storages are written as separate copies
    tmp = out + ".tmp"
    save(tmp, tensors, {"format": "pt"})
    os.replace(tmp, out)
    print(f"wrote {out}: {len(tensors)} tensors")


if __name__ == "__main__":
    main()
