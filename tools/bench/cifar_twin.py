#!/usr/bin/env python3
"""PyTorch twin of `leanback train configs/resnet18_cifar10.json`.

Same recipe as the leanback config it reads: ResNet-18 with the CIFAR stem (torchvision's
resnet18 layout, inline copy in resnet18.py: conv1 3x3 stride 1, no max-pool), the image
folder (`<dir>/train|test/<class>/*.jpg`, classes in sorted order), per-channel
normalisation (CIFAR-10's mean/std unless the config gives them), random crop with zero
padding and horizontal flip on the training split, batch size, epochs, SGD with momentum /
Nesterov / weight decay (none on biases and BatchNorm weights, as leanback's default
no_decay globs), cosine decay with linear warm-up, no clipping when max_grad_norm is 0; a
fresh seeded shuffle every epoch (the permutations differ from leanback's Philox ones).
Evaluates on the test split after every epoch and prints one JSON line per evaluation plus a
summary line (examples/s, minutes per epoch). fp32, torch.set_num_threads(2) by default.

Long runs resume: with --state DIR the model, optimizer, epoch and RNG states are saved
after every epoch and picked up by the next invocation with the same DIR.

    python tools/bench/cifar_twin.py configs/resnet18_cifar10.json --seed 1 [--state DIR]
        [--threads 2] [--max-steps N] [--max-train-examples N]
Needs torch and Pillow (pip install torch pillow).
"""
import argparse
import fnmatch
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet18 import ResNet18  # noqa: E402

CIFAR_MEAN = [0.4914, 0.4822, 0.4465]
CIFAR_STD = [0.2470, 0.2435, 0.2616]


def load_folder(root, limit=0):
    from PIL import Image
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    images, labels = [], []
    for c, name in enumerate(classes):
        files = sorted(f for f in os.listdir(os.path.join(root, name))
                       if f.lower().endswith((".jpg", ".jpeg", ".png")))
        for f in files:
            with Image.open(os.path.join(root, name, f)) as im:
                images.append(np.asarray(im.convert("RGB"), dtype=np.uint8))
            labels.append(c)
    x = np.stack(images)  # (N, H, W, 3)
    y = np.asarray(labels, dtype=np.int64)
    if limit:
        keep = np.random.default_rng(0).permutation(len(y))[:limit]
        x, y = x[keep], y[keep]
    return torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(y), classes


def normalise(u8, mean, std):
    x = u8.float() / 255.0
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


def augment(u8, pad, flip, gen):
    """Random crop with zero padding (before normalisation, as torchvision's RandomCrop on
    PIL images) and horizontal flip, per image."""
    n, _, h, w = u8.shape
    if pad:
        padded = F.pad(u8, (pad, pad, pad, pad))
        oy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
        ox = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
        u8 = torch.stack([padded[i, :, oy[i]:oy[i] + h, ox[i]:ox[i] + w] for i in range(n)])
    if flip:
        mask = torch.rand(n, generator=gen) < 0.5
        u8 = torch.where(mask.view(n, 1, 1, 1), u8.flip(3), u8)
    return u8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--max-train-examples", type=int, default=0)
    ap.add_argument("--state", default="", help="directory for per-epoch resume state")
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    data, tr, opt_c, sch = cfg["data"], cfg.get("train", {}), cfg.get("optimizer", {}), cfg.get("schedule", {})
    seed = a.seed if a.seed is not None else tr.get("seed", 42)
    torch.set_num_threads(a.threads)
    torch.manual_seed(seed)
    root = data["dir"]
    xtr, ytr, classes = load_folder(os.path.join(root, "train"), a.max_train_examples)
    xte, yte, _ = load_folder(os.path.join(root, "test"))
    mean, std = data.get("mean", CIFAR_MEAN), data.get("std", CIFAR_STD)
    B = data.get("batch_size", 128)
    EB = data.get("eval_batch_size", B)
    epochs = tr.get("epochs", 15)
    steps_per_epoch = math.ceil(len(ytr) / B)
    total = a.max_steps or int(round(epochs * steps_per_epoch))
    warmup = sch.get("warmup_steps", 0) or int(sch.get("warmup_ratio", 0.0) * total)

    model = ResNet18(len(classes))
    model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    # leanback's optimizer.no_decay globs (its defaults unless the config sets them), matched
    # the same way against the same (torchvision) names.
    globs = opt_c.get("no_decay", ["*bias", "*LayerNorm.weight", "*layernorm*.weight", "*norm*.weight",
                                   "*bn*.weight", "*ln*.weight"])
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if any(fnmatch.fnmatchcase(n, g) for g in globs) else decay).append(p)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": opt_c.get("weight_decay", 0.0)},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=opt_c.get("lr", 0.1), momentum=opt_c.get("momentum", 0.0),
                          nesterov=opt_c.get("nesterov", False))
    base_lr = opt_c.get("lr", 0.1)

    def lr_at(step):
        if warmup and step < warmup:
            return base_lr * step / warmup
        progress = min(1.0, max(0.0, (step - warmup) / max(1, total - warmup)))
        return base_lr * 0.5 * (1 + math.cos(math.pi * progress))

    start_epoch, step, train_s, seen = 0, 0, 0.0, 0
    state_file = os.path.join(a.state, "state.pt") if a.state else ""
    if state_file and os.path.exists(state_file):
        st = torch.load(state_file, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["optimizer"])
        start_epoch, step, train_s, seen = st["epoch"], st["step"], st["train_s"], st["seen"]
        torch.set_rng_state(st["torch_rng"])
        print(json.dumps({"resumed": state_file, "epoch": start_epoch, "step": step}), file=sys.stderr)

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(yte), EB):
                out = model(normalise(xte[i:i + EB], mean, std))
                correct += (out.argmax(1) == yte[i:i + EB]).sum().item()
        model.train()
        return correct / len(yte)

    acc = None
    for epoch in range(start_epoch, epochs):
        if step >= total:
            break
        gen = torch.Generator().manual_seed(seed * 1000003 + epoch)
        order = torch.randperm(len(ytr), generator=gen)
        model.train()
        t0 = time.perf_counter()
        for i in range(0, len(order), B):
            if step >= total:
                break
            idx = order[i:i + B]
            x = normalise(augment(xtr[idx], data.get("random_crop_padding", 0), data.get("horizontal_flip", False), gen),
                          mean, std)
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            loss = F.cross_entropy(model(x), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if tr.get("max_grad_norm", 0) > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tr["max_grad_norm"])
            opt.step()
            step += 1
            seen += len(idx)
            if step % tr.get("log_every", 50) == 0:
                print(json.dumps({"step": step, "loss": loss.item(), "lr": lr_at(step)}), file=sys.stderr, flush=True)
        train_s += time.perf_counter() - t0
        acc = evaluate()
        print(json.dumps({"epoch": epoch + 1, "step": step, "eval_accuracy": acc}), flush=True)
        if state_file:
            os.makedirs(a.state, exist_ok=True)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch + 1, "step": step,
                        "train_s": train_s, "seen": seen, "torch_rng": torch.get_rng_state()}, state_file + ".tmp")
            os.replace(state_file + ".tmp", state_file)
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "task": "cifar10", "seed": seed,
                      "steps": step, "final": {"eval_accuracy": acc if acc is not None else evaluate()},
                      "examples_per_s": seen / train_s if train_s else 0.0, "train_s": train_s,
                      "minutes_per_epoch": train_s / 60.0 * steps_per_epoch / max(1, step), "threads": a.threads}))


if __name__ == "__main__":
    main()
