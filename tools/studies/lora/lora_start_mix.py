#!/usr/bin/env python3
"""Mixes two LoRA starts (PEFT adapter directories: leanback's `export` of a one-step probe, or
glue_twin.py --save-init): the adapters' A from one, the classifier head from the other, B zero,
the adapters' dropout off; for asking which part of a start decides a run (NOTES.md here,
"RTE's LoRA gap"). The result is a PEFT adapter directory leanback trains from
(model.pretrained) and glue_twin.py starts from (--init).

    tools/studies/lora/lora_start_mix.py --a DIR_A --head DIR_HEAD --out DIR
"""
import argparse
import json
import os
import shutil

from safetensors.torch import load_file, save_file

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--a", required=True, help="adapter directory whose lora_A weights are taken")
ap.add_argument("--head", required=True, help="adapter directory whose classifier weights are taken")
ap.add_argument("--out", required=True, help="directory to write (must not exist)")
args = ap.parse_args()
a = load_file(os.path.join(args.a, "adapter_model.safetensors"))
h = load_file(os.path.join(args.head, "adapter_model.safetensors"))
if set(a) != set(h):
    raise SystemExit(f"lora_start_mix: the adapters hold different tensors: {sorted(set(a) ^ set(h))}")
shutil.copytree(args.a, args.out)  # fails if --out exists
mixed = {}
for k in a:
    mixed[k] = (h if "classifier" in k else a)[k].clone()
    if "lora_B" in k:
        mixed[k].zero_()
save_file(mixed, os.path.join(args.out, "adapter_model.safetensors"))
cfg_path = os.path.join(args.out, "adapter_config.json")
cfg = json.load(open(cfg_path))
cfg["lora_dropout"] = 0.0
json.dump(cfg, open(cfg_path, "w"), indent=2)
print(f"lora_start_mix: {args.out}: A from {args.a}, head from {args.head}")
