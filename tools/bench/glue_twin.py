#!/usr/bin/env python3
"""PyTorch + transformers twin of `leanback train configs/minilm_TASK.json`.

Same recipe as the leanback config it reads (model directory, max_seq_len with dynamic
padding, batch size, epochs, AdamW lr / weight decay with no decay on biases and LayerNorm
weights, linear decay with warm-up ratio, clipping at 1.0, dropout from the model's
config), same tokenizer (BertTokenizerFast over the same vocabulary, longest-first
truncation), same data order policy (a fresh seeded shuffle every epoch; the permutations
themselves differ from leanback's Philox ones) and the same seeds. Evaluates on the dev
split at the end of every epoch with the official GLUE metric(s), under Hugging Face's
names, and prints one JSON line per evaluation plus a summary line with examples/s and
minutes per epoch. fp32, torch.set_num_threads(2) by default. A config with a `lora` section
trains PEFT's LoRA (LoraConfig with the same r, alpha, dropout, target_modules,
modules_to_save and bias) with the optimizer over the trainable parameters only.

    python tools/bench/glue_twin.py configs/minilm_mrpc.json --seed 1 [--threads 2] [--max-steps N]

Needs torch, transformers, numpy, scipy and scikit-learn (the metrics), and peft for LoRA:
    python3 -m venv $VENV && $VENV/bin/pip install torch transformers peft scipy scikit-learn

For a lockstep comparison with leanback (tools/bench/glue_lockstep.sh): --order leanback takes
leanback's own epoch permutations (tools/bench/lb_philox.py), --save-init DIR writes the model
as initialised (classifier included) for leanback to start from, --init DIR starts from
leanback's own start instead (its `export` of a checkpoint: a model, or a PEFT adapter),
--log-steps prints each step's training loss (and time), and the config's model.hidden_dropout_prob /
attention_probs_dropout_prob override the pretrained model's. --gradient-checkpointing
recomputes every encoder layer in backward (the memory budget's anchor; the summary's
step_ms_median compares with leanback's metrics.jsonl step_ms).
"""
import argparse
import csv
import json
import math
import os
import random
import resource
import sys
import time

import numpy as np


def expand(path):
    home = os.environ.get("LEANBACK_HOME") or os.path.expanduser("~/.cache/leanback")
    return os.path.expanduser(path.replace("${LEANBACK_HOME}", home))


# Columns per task, as in Hugging Face's GLUE processors (and src/data/glue.cpp).
TASKS = {
    "cola": dict(dir="CoLA", a=3, b=None, label=1, header=False, labels=["0", "1"]),
    "sst2": dict(dir="SST-2", a="sentence", b=None, label="label", header=True, labels=["0", "1"]),
    "mrpc": dict(dir="MRPC", a="#1 String", b="#2 String", label="Quality", header=True, labels=["0", "1"]),
    "stsb": dict(dir="STS-B", a="sentence1", b="sentence2", label="score", header=True, labels=None),
    "rte": dict(dir="RTE", a="sentence1", b="sentence2", label="label", header=True,
                labels=["entailment", "not_entailment"]),
    "wnli": dict(dir="WNLI", a="sentence1", b="sentence2", label="label", header=True, labels=["0", "1"]),
    "qnli": dict(dir="QNLI", a="question", b="sentence", label="label", header=True,
                 labels=["entailment", "not_entailment"]),
    "qqp": dict(dir="QQP", a="question1", b="question2", label="is_duplicate", header=True, labels=["0", "1"]),
}


def read_split(task, folder, split):
    spec = TASKS[task]
    path = os.path.join(folder, split + ".tsv")
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if spec["header"]:
        header, rows = rows[0], rows[1:]
        col = {name: i for i, name in enumerate(header)}
        ia, il = col[spec["a"]], col[spec["label"]]
        ib = col[spec["b"]] if spec["b"] else None
    else:
        ia, il, ib = spec["a"], spec["label"], None
    a, b, y = [], [], []
    for r in rows:
        if not r:
            continue
        a.append(r[ia])
        b.append(r[ib] if ib is not None else None)
        lab = r[il]
        y.append(float(lab) if spec["labels"] is None else spec["labels"].index(lab))
    return a, b, y


def metrics(task, pred, gold):
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
    if task == "stsb":
        p, s = pearsonr(pred, gold)[0], spearmanr(pred, gold)[0]
        return {"pearson": p, "spearmanr": s, "combined_score": (p + s) / 2}
    if task == "cola":
        return {"matthews_correlation": matthews_corrcoef(gold, pred)}
    acc = accuracy_score(gold, pred)
    if task in ("mrpc", "qqp"):
        f1 = f1_score(gold, pred)
        return {"accuracy": acc, "f1": f1, "combined_score": (acc + f1) / 2}
    return {"accuracy": acc}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N optimizer steps (throughput runs)")
    ap.add_argument("--order", choices=["torch", "leanback"], default="torch",
                    help="epoch permutations: torch.randperm (default) or leanback's Philox ones")
    ap.add_argument("--save-init", default="", help="write the initialised model (HF format) to this directory")
    ap.add_argument("--init", default="",
                    help="start from this directory instead (leanback export's output: a model, or with a lora "
                         "section a PEFT adapter over the config's pretrained model)")
    ap.add_argument("--log-steps", action="store_true", help="print one JSON line per optimizer step")
    ap.add_argument("--gradient-checkpointing", action="store_true",
                    help="recompute every encoder layer in backward (transformers' activation checkpointing, "
                         "non-reentrant torch.utils.checkpoint): the memory budget study's anchor")
    args = ap.parse_args()
    extra = os.environ.get("LB_BENCH_EXTRA_PATH")
    if extra:
        sys.path.extend(p for p in extra.split(":") if p)
    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast
    import scipy.stats  # noqa: F401 -- the metrics' modules: a missing one fails here, not after training
    import sklearn.metrics  # noqa: F401

    cfg = json.load(open(args.config))
    task = cfg["data"]["task"]
    model_dir = expand(cfg["model"]["pretrained"])
    folder = cfg["data"]["dir"]
    max_len = cfg["data"].get("max_seq_len", 128)
    bs = cfg["data"].get("batch_size", 32)
    epochs = cfg["train"].get("epochs", 3)
    seed = args.seed if args.seed is not None else cfg["train"].get("seed", 42)
    lr = cfg["optimizer"].get("lr", 5e-5)
    wd = cfg["optimizer"].get("weight_decay", 0.0)
    warmup_ratio = cfg.get("schedule", {}).get("warmup_ratio", 0.0)
    clip = cfg["train"].get("max_grad_norm", 1.0)
    torch.set_num_threads(args.threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

    tok = BertTokenizerFast.from_pretrained(model_dir)
    num_labels = 1 if task == "stsb" else len(TASKS[task]["labels"])
    overrides = {k: cfg["model"][k] for k in ("hidden_dropout_prob", "attention_probs_dropout_prob")
                 if k in cfg["model"]}
    lora = cfg.get("lora")
    init_is_adapter = bool(args.init) and os.path.exists(os.path.join(args.init, "adapter_config.json"))
    model = BertForSequenceClassification.from_pretrained(
        args.init if args.init and not init_is_adapter else model_dir, num_labels=num_labels, **overrides)
    if init_is_adapter:  # leanback's start: its adapters and head, trained from here with the config's recipe
        from peft import PeftModel
        if lora is None:
            sys.exit(f"glue_twin: --init {args.init} is a LoRA adapter; the config has no lora section")
        model = PeftModel.from_pretrained(model, args.init, is_trainable=True)
        p = lora.get("dropout", 0.0)
        for m in model.modules():  # the config's adapter dropout, not the saved one
            if isinstance(getattr(m, "lora_dropout", None), torch.nn.ModuleDict):
                for k in list(m.lora_dropout.keys()):
                    m.lora_dropout[k] = torch.nn.Dropout(p) if p > 0 else torch.nn.Identity()
    elif lora is not None:  # the config's LoRA section, as PEFT's LoraConfig (configs/README.md)
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(
            task_type="SEQ_CLS", r=lora.get("r", 8), lora_alpha=lora.get("alpha", 8),
            lora_dropout=lora.get("dropout", 0.0), target_modules=lora.get("target_modules", ["query", "value"]),
            modules_to_save=lora.get("modules_to_save", ["classifier"]), bias=lora.get("bias", "none")))
    if args.gradient_checkpointing:
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers 5's name; 4's is deprecated there
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if args.save_init:
        model.save_pretrained(args.save_init, safe_serialization=True)
        import shutil  # the same vocabulary files leanback reads
        for f in ("vocab.txt", "tokenizer_config.json"):
            if os.path.exists(os.path.join(model_dir, f)):
                shutil.copy(os.path.join(model_dir, f), args.save_init)

    def encode(split):
        a, b, y = read_split(task, folder, split)
        enc = tok(a, b if b[0] is not None else None, truncation="longest_first", max_length=max_len)
        return enc["input_ids"], enc["token_type_ids"], y

    train_ids, train_types, train_y = encode("train")
    dev_ids, dev_types, dev_y = encode("dev")

    def batch(ids, types, ys, idx):
        T = max(len(ids[i]) for i in idx)
        x = torch.zeros(len(idx), T, dtype=torch.long)
        t = torch.zeros(len(idx), T, dtype=torch.long)
        m = torch.zeros(len(idx), T, dtype=torch.long)
        for r, i in enumerate(idx):
            n = len(ids[i])
            x[r, :n] = torch.tensor(ids[i])
            t[r, :n] = torch.tensor(types[i])
            m[r, :n] = 1
        y = torch.tensor([ys[i] for i in idx], dtype=torch.float if task == "stsb" else torch.long)
        return x, t, m, y

    no_decay = ("bias", "LayerNorm.weight")
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]  # LoRA: adapters and head
    groups = [
        {"params": [p for n, p in trained if not any(k in n for k in no_decay)], "weight_decay": wd},
        {"params": [p for n, p in trained if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8)
    n = len(train_ids)
    steps_per_epoch = math.ceil(n / bs)
    total = max(1, math.ceil(epochs * steps_per_epoch))
    if args.max_steps:
        total = min(total, args.max_steps)
    warmup = min(math.ceil(warmup_ratio * total), max(total - 1, 0))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))

    def evaluate():
        model.eval()
        preds = []
        with torch.no_grad():
            for s in range(0, len(dev_ids), bs):
                idx = list(range(s, min(s + bs, len(dev_ids))))
                x, t, m, _ = batch(dev_ids, dev_types, dev_y, idx)
                logits = model(input_ids=x, token_type_ids=t, attention_mask=m).logits
                preds += logits[:, 0].tolist() if task == "stsb" else logits.argmax(-1).tolist()
        model.train()
        return {"eval_" + k: float(v) for k, v in metrics(task, preds, dev_y).items()}

    # Memory by category, as leanback's report: parameters, gradients (the trained ones),
    # optimizer state, and the largest over the steps of the bytes autograd keeps for backward
    # at the end of the forward (unique storages, parameters excluded; saved_tensors_hooks).
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in param_ptrs:
            kept[st.data_ptr()] = st.nbytes()
        return t

    mb = 1e6
    memory = {"params_mb": sum(p.numel() * p.element_size() for p in model.parameters()) / mb,
              "grads_mb": sum(p.numel() * p.element_size() for _, p in trained) / mb, "kept_mb": 0.0}

    model.train()
    step, train_time, examples = 0, 0.0, 0
    step_ms = []
    g = torch.Generator().manual_seed(seed)
    epoch = 0
    evals = []
    while step < total:
        if args.order == "leanback":
            from lb_philox import epoch_order
            order = epoch_order(n, seed, epoch)
        else:
            order = torch.randperm(n, generator=g).tolist()
        for s in range(0, n, bs):
            if step >= total:
                break
            idx = order[s:s + bs]
            x, t, m, y = batch(train_ids, train_types, train_y, idx)
            t0 = time.perf_counter()
            kept.clear()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = model(input_ids=x, token_type_ids=t, attention_mask=m, labels=y)
            memory["kept_mb"] = max(memory["kept_mb"], sum(kept.values()) / mb)
            lr_used = sched.get_last_lr()[0]
            out.loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_([p for _, p in trained], clip)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step_ms.append((time.perf_counter() - t0) * 1000)
            train_time += step_ms[-1] / 1000
            examples += len(idx)
            step += 1
            if args.log_steps:
                print(json.dumps({"step": step, "loss": out.loss.item(), "lr": lr_used, "ms": step_ms[-1]}), flush=True)
        epoch += 1
        if not args.max_steps:
            e = evaluate()
            e.update({"framework": "pytorch", "task": task, "seed": seed, "epoch": epoch, "step": step})
            print(json.dumps(e), flush=True)
            evals.append(e)
    summary = {"framework": "pytorch", "torch": torch.__version__, "task": task, "seed": seed, "steps": step,
               "examples_per_s": examples / train_time, "train_s": train_time,
               "step_ms_median": float(np.median(step_ms)), "gradient_checkpointing": args.gradient_checkpointing,
               "minutes_per_epoch": train_time / 60 * steps_per_epoch / step, "threads": args.threads,
               "lora": lora is not None,
               "optimizer_mb": sum(v.numel() * v.element_size() for st in opt.state.values()
                                   for v in st.values() if torch.is_tensor(v)) / mb,
               **memory,
               # Under checkpointing the checkpoint's own hooks take what a layer saves, not ours:
               # kept_mb then counts only what is saved outside the layers (embeddings, pooler, head).
               "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if evals:
        summary["final"] = evals[-1]
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
