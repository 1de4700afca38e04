#!/usr/bin/env python3
"""Opens a `leanback export` directory in Hugging Face transformers (and PEFT) and checks that
it gives the logits `leanback eval --predictions` gave, on the same GLUE split's texts
tokenized by the exported tokenizer.

    tools/export_check.py --export DIR --predictions PRED.jsonl --task mrpc \
        --data ../shared/data/glue/MRPC [--split dev] [--tolerance 1e-5]

A PEFT export (adapter_config.json) is loaded onto its base: AutoModelForSequenceClassification
from adapter_config's base_model_name_or_path (its local copy, as leanback finds it) with the
labels the adapter was trained for,
then peft.PeftModel.from_pretrained. Prints the largest difference relative to the largest
|logit| and exits 1 when it is above the tolerance, 77 when transformers (or peft, for an
adapter) is not installed.
"""
import argparse
import glob
import csv
import json
import os
import sys

# GLUE's text columns by header name (leanback's src/data/glue.cpp); CoLA's train/dev files
# have no header (the sentence is the 4th field).
TEXT_COLUMNS = {"sst2": ["sentence"], "mrpc": ["#1 String", "#2 String"], "stsb": ["sentence1", "sentence2"],
                "qnli": ["question", "sentence"], "qqp": ["question1", "question2"],
                "rte": ["sentence1", "sentence2"], "wnli": ["sentence1", "sentence2"]}


def read_texts(task, data_dir, split):
    """{index: (text_a[, text_b])}: the "index" column where the file has one, else the row number."""
    path = os.path.join(data_dir, split + ".tsv")
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if task == "cola" and rows and rows[0][0] != "index":
        return {i: (r[3],) for i, r in enumerate(rows)}
    header, rows = rows[0], rows[1:]
    cols = [header.index(c) for c in (TEXT_COLUMNS.get(task) or ["sentence"])]
    idx = next((header.index(n) for n in ("index", "id") if n in header), None)
    return {int(r[idx]) if idx is not None else i: tuple(r[c] for c in cols) for i, r in enumerate(rows)}


def local_base(name, adapter_dir):
    """base_model_name_or_path as a local directory, as leanback reads it: a path, a path relative
    to the adapter, or a Hugging Face name whose copy tools/fetch_pretrained.sh put under
    $LEANBACK_HOME/models (its .hub_name); else the name itself (transformers may download it)."""
    for path in (name, os.path.join(adapter_dir, name)):
        if os.path.isdir(path):
            return path
    home = os.environ.get("LEANBACK_HOME") or os.path.expanduser("~/.cache/leanback")
    for marker in glob.glob(os.path.join(home, "models", "*", ".hub_name")):
        if open(marker).read().strip() == name:
            return os.path.dirname(marker)
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--predictions", required=True)
    ap.add_argument("--task", required=True, choices=sorted(TEXT_COLUMNS) + ["cola"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    a = ap.parse_args()
    try:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    adapter = os.path.exists(os.path.join(a.export, "adapter_config.json"))
    if adapter:
        try:
            from peft import PeftModel
        except ImportError as e:
            print(f"skipped: {e}")
            return 77
        cfg = json.load(open(os.path.join(a.export, "adapter_config.json")))
        from safetensors import safe_open
        with safe_open(os.path.join(a.export, "adapter_model.safetensors"), "pt") as f:
            num_labels = f.get_slice("base_model.model.classifier.weight").get_shape()[0]
        base = AutoModelForSequenceClassification.from_pretrained(local_base(cfg["base_model_name_or_path"], a.export),
                                                                  num_labels=num_labels)
        model = PeftModel.from_pretrained(base, a.export)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(a.export)
    model.eval()
    tok = AutoTokenizer.from_pretrained(a.export)
    texts = read_texts(a.task, a.data, a.split)
    preds = [json.loads(l) for l in open(a.predictions) if l.strip()]
    worst, scale = 0.0, 0.0
    with torch.no_grad():
        for p in preds:
            enc = tok(*texts[p["index"]], truncation=True, max_length=tok.model_max_length, return_tensors="pt")
            logits = model(**enc).logits[0].double()
            ours = torch.tensor(p["logits"], dtype=torch.float64).reshape(-1)
            worst = max(worst, (logits - ours).abs().max().item())
            scale = max(scale, ours.abs().max().item())
    rel = worst / max(scale, 1e-30)
    kind = "peft adapter" if adapter else "model"
    print(f"{a.export} ({kind}): {len(preds)} examples, max |logit difference| {worst:.3g}, "
          f"relative to max |logit| {rel:.3g} (tolerance {a.tolerance:g})")
    return 0 if rel <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
