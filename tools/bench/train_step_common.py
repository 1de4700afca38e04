"""Shared harness of the PyTorch twins of `leanback bench bert_mini|vit_tiny|resnet18`.

Each script builds its model and one fixed batch, then calls run(); a step is forward with
loss, backward, optimizer.step() and optimizer.zero_grad(set_to_none=True), timed per phase
as in src/cli/bench_train_step.cpp; the medians over --iters timed steps (after --warmup)
are printed as one JSON line with the C++ bench's fields.

saved_bytes: unique storages the autograd graph holds after forward, parameters excluded
(saved_tensors_hooks, like leanback's autograd::saved_bytes()). PyTorch has no CPU
allocator statistics, so peak_bytes is null; both frameworks report peak_rss_bytes
(the process's peak resident set, getrusage) instead. On the CPU, activation_peak_bytes (the
C++ bench's field: all bytes but parameters, gradients and optimizer state) comes from one
more, untimed forward + backward under torch.profiler with profile_memory: the largest sum of
the bytes allocated and not yet freed since the forward began. The gradients already exist
then (zero_grad(set_to_none=False) before it), so backward accumulates into them and
allocates none; the optimizer step is outside it.

Missing packages: transformers / torchvision are looked up in this interpreter first, then in
the directories of $LB_BENCH_EXTRA_PATH (colon-separated), which are *appended* to sys.path
so that they never shadow this interpreter's torch (e.g. a PyPI torch in a venv that lacks
transformers: LB_BENCH_EXTRA_PATH=$VENV_GOLD/lib/python3.11/site-packages).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

for _p in filter(None, os.environ.get("LB_BENCH_EXTRA_PATH", "").split(":")):
    if _p not in sys.path:
        sys.path.append(_p)

import torch  # noqa: E402


def parse_args(doc, add_arguments=None):
    """The twins' common flags; add_arguments(parser) adds a script's own."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    if add_arguments:
        add_arguments(p)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true")
    p.add_argument("--device", default="cpu", help="cpu or cuda (the GPU twins of `--device cuda`)")
    p.add_argument("--autocast", action="store_true",
                   help="torch.autocast(bfloat16) around forward (the twin of leanback's --precision bf16)")
    a = p.parse_args()
    if a.iters < 1 or a.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    return a


def activation_peak(model, optimizer, forward):
    """The forward + backward's peak of bytes allocated beyond what existed before it (CPU)."""
    from torch.profiler import ProfilerActivity, profile
    from torch._C._profiler import _EventType
    if any(p.grad is None for p in model.parameters() if p.requires_grad):  # gradients in place
        forward().backward()
    optimizer.zero_grad(set_to_none=False)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        loss = forward()
        loss.backward()
        del loss
    allocs = []

    def walk(e):
        if e.tag == _EventType.Allocation:
            allocs.append((e.start_time_ns, e.extra_fields.alloc_size))
        for c in e.children:
            walk(c)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    allocs.sort(key=lambda x: x[0])
    cur = peak = 0
    for _, n in allocs:
        cur += n
        peak = max(peak, cur)
    optimizer.zero_grad(set_to_none=True)
    return peak


def run(name, a, model, optimizer, forward, extra, count_saved=True):
    """forward() returns the scalar loss of the fixed batch. count_saved=False leaves
    saved_bytes None (a compiled model: the hooks would change the graph it runs)."""
    model.train()
    params = {p.data_ptr() for p in model.parameters()}
    saved_storages = {}

    def pack(t):
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        if t.data_ptr() not in params:
            saved_storages[s.data_ptr()] = s.nbytes()
        return t

    fwd, bwd, upd, step = [], [], [], []
    saved = 0
    cuda = a.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)  # a phase ends when its kernels have
    if a.autocast:
        plain = forward

        def forward():
            with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16):
                return plain()
    optimizer.zero_grad(set_to_none=True)
    for it in range(a.warmup + a.iters):
        last = it == a.warmup + a.iters - 1
        saved_storages.clear()
        t0 = time.perf_counter()
        if last and count_saved:  # the hook costs a little; use it on the last step only
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = forward()
        else:
            loss = forward()
        sync()
        t1 = time.perf_counter()
        if last:
            saved = sum(saved_storages.values()) if count_saved else None
        t2 = time.perf_counter()
        loss.backward()
        del loss
        sync()
        t3 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        t4 = time.perf_counter()
        if it >= a.warmup:
            fwd.append((t1 - t0) * 1e3)
            bwd.append((t3 - t2) * 1e3)
            upd.append((t4 - t3) * 1e3)
            step.append((t1 - t0 + t4 - t2) * 1e3)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # before the profiled step
    r = {
        "workload": name,
        "strategy": "vanilla",
        "framework": f"pytorch {torch.__version__}",
        "device": a.device,
        "dtype": "f32",
        "precision": "autocast bf16" if a.autocast else "f32",
        "iters": a.iters,
        "warmup": a.warmup,
        "ms_per_step": statistics.median(step),
        "forward_ms": statistics.median(fwd),
        "backward_ms": statistics.median(bwd),
        "optimizer_ms": statistics.median(upd),
        "saved_bytes": saved,
        "activation_peak_bytes": None if cuda else activation_peak(model, optimizer, forward),
        "peak_bytes": None,
        "peak_rss_bytes": rss,
        "parameters": sum(p.numel() for p in model.parameters()),
        "threads": {"torch": torch.get_num_threads()},
    }
    r.update(extra)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{name} [vanilla, {r['framework']}]: {r['ms_per_step']:.2f} ms/step (forward "
              f"{r['forward_ms']:.2f} ms, backward {r['backward_ms']:.2f} ms, optimizer "
              f"{r['optimizer_ms']:.2f} ms), saved {(saved or 0) / 2**20:.2f} MiB, activation peak "
              f"{(r['activation_peak_bytes'] or 0) / 2**20:.2f} MiB, peak RSS "
              f"{r['peak_rss_bytes'] / 2**20:.1f} MiB, median of {a.iters} iters, "
              f"{torch.get_num_threads()} threads")
    return 0
