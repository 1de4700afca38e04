#!/usr/bin/env python3
"""A LoRA study row's config: configs/minilm_TASK.json with the row's recipe (used by
tools/bench/lora_study.sh and lora_speed.sh). Rows other than "full" train LoRA r 8, alpha 16,
dropout 0.1 (0 for "lora_nodrop") at lr 5e-4 (configs/minilm_mrpc_lora.json's recipe), on
query and value, or on every encoder Linear for "lora_all"; the output section is dropped (the
scripts name the run directory).

    tools/bench/lora_config.py TASK ROW OUT.json
"""
import json
import os
import sys

task, row, dst = sys.argv[1:4]
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
c = json.load(open(os.path.join(root, "configs", f"minilm_{task}.json")))
if row != "full":
    c["optimizer"]["lr"] = 5e-4
    c["lora"] = {"r": 8, "alpha": 16, "dropout": 0.0 if row == "lora_nodrop" else 0.1,
                 "target_modules": ["query", "key", "value", "dense"] if row == "lora_all" else ["query", "value"]}
c.pop("output", None)
json.dump(c, open(dst, "w"), indent=1)
