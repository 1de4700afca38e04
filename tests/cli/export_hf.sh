#!/usr/bin/env bash
# `leanback export` opened by Hugging Face transformers and PEFT: a tiny BERT trained on MRPC
# (shared data, the real uncased vocabulary) is exported and loaded with
# AutoModelForSequenceClassification + AutoTokenizer; that export is then the pretrained base
# of a LoRA run, exported as a PEFT adapter (PeftModel.from_pretrained) and merged. Each must
# give `leanback eval --predictions`' logits within 1e-5 of the largest (tools/export_check.py);
# an adapter PEFT made itself is read back by leanback (model.pretrained) with PEFT's logits.
# Skipped, with the reason, without the shared data or a Python with torch, transformers and
# peft ($LEANBACK_TEST_PYTHON, default python3).
# Usage: export_hf.sh LEANBACK_BINARY CONFIG_DIR SHARED_DATA_DIR TOOLS_DIR
source "$(dirname "$0")/common.sh" "$@"
data="$3"
tools="$4"
py="${LEANBACK_TEST_PYTHON:-python3}"
[ -f "$data/glue/MRPC/dev.tsv" ] && [ -f "$data/bert-base-uncased/vocab.txt" ] \
  || { echo "skipped: no shared data (glue/MRPC, bert-base-uncased/vocab.txt) under $data"; exit 0; }
"$py" -c "import torch, transformers, peft" 2> /dev/null \
  || { echo "skipped: $py cannot import torch, transformers and peft (set LEANBACK_TEST_PYTHON)"; exit 0; }

cat > "$tmp/full.json" <<JSON
{"model": {"type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 64, "max_position_embeddings": 64},
 "data": {"task": "mrpc", "dir": "$data/glue/MRPC", "vocab": "$data/bert-base-uncased/vocab.txt",
          "max_seq_len": 64, "batch_size": 16, "max_train_examples": 64, "max_eval_examples": 48},
 "train": {"max_steps": 4, "seed": 3},
 "optimizer": {"lr": 1e-3},
 "output": {"export": true}}
JSON
"$lb" train "$tmp/full.json" --out "$tmp/full" --no-progress > /dev/null 2> "$tmp/full.err" \
  || { cat "$tmp/full.err"; fail "training the tiny model failed"; }
grep -q "\"not_equivalent\"" "$tmp/full/export/config.json" || fail "config.json lacks MRPC's class names"
"$lb" eval "$tmp/full.json" --checkpoint "$tmp/full" --predictions "$tmp/full.jsonl" > /dev/null 2>&1 \
  || fail "eval of the tiny model failed"
"$py" "$tools/export_check.py" --export "$tmp/full/export" --predictions "$tmp/full.jsonl" --task mrpc \
  --data "$data/glue/MRPC" || fail "transformers' logits differ from leanback eval's"

cat > "$tmp/lora.json" <<JSON
{"model": {"type": "bert", "pretrained": "$tmp/full/export"},
 "data": {"task": "mrpc", "dir": "$data/glue/MRPC", "max_seq_len": 64, "batch_size": 16,
          "max_train_examples": 64, "max_eval_examples": 48},
 "train": {"max_steps": 4, "seed": 4},
 "optimizer": {"lr": 1e-2},
 "lora": {"r": 4, "alpha": 8, "target_modules": ["query", "value", "dense"]}}
JSON
"$lb" train "$tmp/lora.json" --out "$tmp/lora" --no-progress > /dev/null 2> "$tmp/lora.err" \
  || { cat "$tmp/lora.err"; fail "LoRA training failed"; }
"$lb" eval "$tmp/lora.json" --checkpoint "$tmp/lora" --predictions "$tmp/lora.jsonl" > /dev/null 2>&1 \
  || fail "eval of the LoRA run failed"
"$lb" export "$tmp/lora" --out "$tmp/peft" 2> /dev/null || fail "export (PEFT) failed"
"$lb" export "$tmp/lora" --out "$tmp/merged" --merge 2> /dev/null || fail "export --merge failed"
for d in peft merged; do
  "$py" "$tools/export_check.py" --export "$tmp/$d" --predictions "$tmp/lora.jsonl" --task mrpc \
    --data "$data/glue/MRPC" || fail "the $d export's logits differ from leanback eval's"
done

# An adapter PEFT made itself (random A, B and head) on the exported model, given to leanback
# as model.pretrained: `leanback eval` without a checkpoint gives PEFT's logits.
"$py" - "$tmp/full/export" "$tmp/peft_made" <<'PY' || fail "PEFT could not make an adapter"
import sys, torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from peft import LoraConfig, get_peft_model
torch.manual_seed(0)
base = AutoModelForSequenceClassification.from_pretrained(sys.argv[1])
model = get_peft_model(base, LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["query", "value"],
                                        init_lora_weights=False))
with torch.no_grad():
    for name, p in model.named_parameters():
        if "modules_to_save" in name:
            p.add_(0.1 * torch.randn_like(p))  # a head of its own
model.save_pretrained(sys.argv[2])
AutoTokenizer.from_pretrained(sys.argv[1]).save_pretrained(sys.argv[2])
PY
cat > "$tmp/peft_made.json" <<JSON
{"model": {"type": "bert", "pretrained": "$tmp/peft_made"},
 "data": {"task": "mrpc", "dir": "$data/glue/MRPC", "max_seq_len": 64, "max_eval_examples": 48}}
JSON
"$lb" eval "$tmp/peft_made.json" --predictions "$tmp/peft_made.jsonl" > /dev/null 2> "$tmp/peft_made.err" \
  || { cat "$tmp/peft_made.err"; fail "leanback could not evaluate PEFT's adapter"; }
"$py" "$tools/export_check.py" --export "$tmp/peft_made" --predictions "$tmp/peft_made.jsonl" --task mrpc \
  --data "$data/glue/MRPC" || fail "leanback's logits of PEFT's adapter differ from PEFT's"
echo "ok"
