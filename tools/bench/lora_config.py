#!/usr/bin/env python3
"""The LoRA studies' recipe, in one place: r 8, alpha 16, dropout 0.1 at lr 5e-4
(configs/minilm_mrpc_lora.json's recipe) on the named Linear layers.

As a script, a LoRA study row's config (tools/studies/lora/lora_study.sh and lora_speed.sh):
configs/minilm_TASK.json with the row's recipe. Rows other than "full" train LoRA on query
and value, or on every encoder Linear for "lora_all", with the adapters' dropout 0 for
"lora_nodrop"; the output section is dropped (the scripts name the run directory).

    tools/bench/lora_config.py TASK ROW OUT.json

glue_lockstep.sh and lora_starts.sh import with_lora() for their own target lists.
"""
import json
import os
import sys

QUERY_VALUE = ["query", "value"]
ALL_LINEAR = ["query", "key", "value", "dense"]


def with_lora(config, targets, dropout=0.1):
    """config (a parsed leanback config) with the LoRA recipe on `targets`, changed in place."""
    config["optimizer"]["lr"] = 5e-4
    config["lora"] = {"r": 8, "alpha": 16, "dropout": dropout, "target_modules": list(targets)}
    return config


def row_config(task, row):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    c = json.load(open(os.path.join(root, "configs", f"minilm_{task}.json")))
    if row != "full":
        with_lora(c, ALL_LINEAR if row == "lora_all" else QUERY_VALUE,
                  dropout=0.0 if row == "lora_nodrop" else 0.1)
    c.pop("output", None)
    return c


if __name__ == "__main__":
    task, row, dst = sys.argv[1:4]
    json.dump(row_config(task, row), open(dst, "w"), indent=1)
