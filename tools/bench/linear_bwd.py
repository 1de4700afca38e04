#!/usr/bin/env python3
"""PyTorch twin of `leanback bench linear_bwd`: Linear 768 -> 3072 with bias on x (32, 128, 768)
f32, weights and x requiring grad, backward from a fixed g_y; warm-up, then the medians of the
forward and backward times. Prints one JSON line with the same fields as the C++ bench.

Usage: python3 tools/bench/linear_bwd.py [--iters N] [--warmup N] [--threads N] [--device cpu|cuda] [--json]
(run with /usr/bin/python3 for Debian's torch, or a venv's python for PyPI's CPU build).
"""
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from train_step_common import parse_args


def main():
    a = parse_args(__doc__)  # shared with the model benchmarks

    B, T, I, O = 32, 128, 768, 3072
    lin = torch.nn.Linear(I, O).to(a.device)  # kaiming-uniform weight, uniform bias, requires grad
    x = torch.randn(B, T, I, device=a.device, requires_grad=True)
    g = torch.randn(B, T, O, device=a.device)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    params = {lin.weight.data_ptr(), lin.bias.data_ptr()}

    # Saved bytes: unique storages the graph keeps for backward, parameters excluded (as
    # leanback's autograd::saved_bytes()).
    saved_storages = {}

    def pack(t):
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        if t.data_ptr() not in params:
            saved_storages[s.data_ptr()] = s.nbytes()
        return t

    fwd, bwd = [], []
    saved = 0
    for it in range(a.warmup + a.iters):
        x.grad = None
        lin.zero_grad(set_to_none=True)
        saved_storages.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            sync()
            t0 = time.perf_counter()
            y = F.linear(x, lin.weight, lin.bias)
            sync()
            t1 = time.perf_counter()
        saved = sum(saved_storages.values())
        t2 = time.perf_counter()
        y.backward(g)
        sync()
        t3 = time.perf_counter()
        assert x.grad is not None and lin.weight.grad is not None and lin.bias.grad is not None
        del y
        if it >= a.warmup:
            fwd.append((t1 - t0) * 1e3)
            bwd.append((t3 - t2) * 1e3)
    steps = [f + b for f, b in zip(fwd, bwd)]
    ms = statistics.median(steps)
    flops = 3 * 2.0 * B * T * I * O
    r = {
        "workload": "linear_bwd",
        "strategy": "vanilla",
        "framework": f"pytorch {torch.__version__}",
        "shape": {"x": [B, T, I], "w": [O, I], "bias": True},
        "dtype": "f32",
        "iters": a.iters,
        "warmup": a.warmup,
        "ms_per_step": ms,
        "forward_ms": statistics.median(fwd),
        "backward_ms": statistics.median(bwd),
        "saved_bytes": saved,
        "gflops": flops / (ms * 1e6),
        "threads": {"torch": torch.get_num_threads()},
    }
    if a.json:
        print(json.dumps(r))
    else:
        print(f"linear_bwd [vanilla, {r['framework']}]: {ms:.2f} ms/step (forward "
              f"{r['forward_ms']:.2f} ms, backward {r['backward_ms']:.2f} ms), "
              f"{r['gflops']:.1f} GFLOP/s, saved {saved / 2**20:.2f} MiB, median of {a.iters} "
              f"iters, {torch.get_num_threads()} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
