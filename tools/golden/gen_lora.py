"""Golden fixture for LoRA (tests/train/lora_test.cpp) from Hugging Face PEFT on a tiny BERT.

Needs transformers and peft (e.g. $VENV/bin/pip install torch transformers peft;
$VENV/bin/python tools/gen_golden.py lora).

The tiny BERT of gen_models.py (float64, dropout off), wrapped by peft.get_peft_model with
LoraConfig(task_type SEQ_CLS, r 4, lora_alpha 8, target_modules query and value, dropout 0,
bias none): the classifier is PEFT's modules_to_save. lora_B starts at zero in PEFT; it is
set to random values here so that every gradient is non-zero. model_bert_lora: every weight
under "w.<leanback name>" (PEFT's names without "base_model.model.", ".base_layer",
".default" and "modules_to_save."), inputs "in.<name>", "logits", "loss", the trainable
parameters' gradients "g.<leanback name>", and "losses" (before each of three AdamW steps,
lr 1e-3 weight decay 0.01 on the trainable parameters, and after the last)."""
import os
import re

import torch

from gen_models import run

try:
    import peft
    import transformers
except ImportError:  # pragma: no cover
    peft = transformers = None


def leanback_name(key):
    key = re.sub(r"^base_model\.model\.", "", key)
    key = key.replace(".base_layer.", ".").replace(".default.", ".").replace("modules_to_save.", "")
    return key


def generate(out):
    if peft is None:
        raise SystemExit("gen_lora.py needs transformers and peft")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=16, type_vocab_size=2,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                  num_labels=3)
    base = transformers.BertForSequenceClassification(cfg).double()
    lora = peft.LoraConfig(task_type=peft.TaskType.SEQ_CLS, r=4, lora_alpha=8, lora_dropout=0.0,
                           target_modules=["query", "value"], bias="none")
    model = peft.get_peft_model(base, lora)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.1)
    ids = torch.randint(1, 50, (3, 8), generator=g)
    types = torch.randint(0, 2, (3, 8), generator=g)
    mask = torch.ones(3, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    labels = torch.randint(0, 3, (3,), generator=g)

    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in trainable if not n.endswith("bias")]
    plain = [p for n, p in trainable if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": plain, "weight_decay": 0.0}],
                            lr=1e-3)

    def forward():
        o = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
        return o.loss, o.logits

    run(model, forward, opt, os.path.join(out, "model_bert_lora.safetensors"),
        {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "labels": labels},
        name=lambda k: None if "original_module" in k else leanback_name(k),
        metadata={"peft": peft.__version__, "transformers": transformers.__version__})
    return 1
