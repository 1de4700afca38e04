#!/usr/bin/env python3
"""The LoRA study's table (lora_study.sh, beside this script): per task and row, leanback's
and the PyTorch + PEFT twin's final dev metric (mean ± std over seeds, x100) and examples/s side by
side with their ratio, leanback's median step time and the memory of its step with the largest
activation peak (parameters, gradients, optimizer state, bytes kept for backward, activation
peak), the twin's parameters, gradients, optimizer state and bytes kept for backward (the most
at the end of a forward, through saved_tensors_hooks), and its max RSS.

Speed (examples/s, ratio, step ms) comes from the runs at the most threads on their CPU, and
at two or more, only: runs with one (THREADS=1 CORE=C, pinned beside other work) count for the
metric and memory. leanback's LoRA rows on the plain backward (LoRA q,v, all Linear, dropout 0,
at a budget) recorded before commit 2442b9e (its frozen layers computed their forward product
twice) count for the metric and memory only too; the side-by-side throughput since is
lora_speed.sh's, tabled by --speed (per CPU, thread count and leanback library version, then per
task, row and strategy: median examples/s over rounds, and the median and range of the
per-round ratios to the twin).

The table is over the study's seeds 1-3; --seeds all (or a list, 1,2,3,4,7) takes others, and
--per-seed prints each seed's pair instead (leanback, twin) for the rows that have both.

    tools/studies/lora/lora_table.py [--seeds all|S,S,...] [--per-seed] [tools/studies/lora/lora_study.jsonl]
    tools/studies/lora/lora_table.py --speed [tools/studies/lora/lora_speed.jsonl]
"""
import collections
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = {"full": "full fine-tuning", "lora": "LoRA q,v", "lora_all": "LoRA all Linear",
        "lora_hot": "LoRA q,v + HOT", "lora_instant": "LoRA q,v + INSTANT",
        "lora_budget": "LoRA q,v at a budget", "lora_nodrop": "LoRA q,v, adapter dropout 0"}


def mean_std(vals, scale=1.0):
    vals = [v * scale for v in vals if v is not None]
    if not vals:
        return "-"
    return f"{statistics.mean(vals):.1f}" + (f" ± {statistics.stdev(vals):.1f}" if len(vals) > 1 else "")


def mb(x):
    return f"{x / 1e6:.1f}"


FIX = "2442b9e"  # a frozen Linear computes its forward product once (before: twice)
PLAIN_LORA_ROWS = {"lora", "lora_all", "lora_nodrop", "lora_budget"}
_has_fix = {}


def has_fix(commit):
    """Whether the checkout `commit` includes FIX (unknown commits count as not)."""
    if commit not in _has_fix:
        r = subprocess.run(["git", "-C", HERE, "merge-base", "--is-ancestor", FIX, commit],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _has_fix[commit] = r.returncode == 0
    return _has_fix[commit]


_library = {}


def library_commit(commit):
    """The last commit at or before `commit` that changed the library (src, include, cuda,
    CMakeLists.txt): runs at checkouts with the same library measure the same code."""
    if commit not in _library:
        r = subprocess.run(["git", "-C", HERE, "log", "-1", "--format=%h", commit, "--", ":/src", ":/include",
                            ":/cuda", ":/CMakeLists.txt"], capture_output=True, text=True)
        _library[commit] = r.stdout.strip() or commit
    return _library[commit]


def speed_table(path):
    runs = [json.loads(l) for l in open(path) if l.strip()]
    groups = collections.defaultdict(list)  # (cpu, threads, library) -> runs
    for r in runs:
        groups[(r["cpu"], r["threads"], library_commit(r["commit"]))].append(r)
    for (cpu, threads, library), rs in groups.items():
        loads = [r["load_before"] for r in rs]
        print(f"{cpu}, {threads} thread(s), {rs[0]['steps']} steps per run, leanback's library as of {library}; "
              f"load average before a run {min(loads):.2f}-{max(loads):.2f}\n")
        strategies = list(dict.fromkeys(r["strategy"] for r in rs if r["framework"] == "leanback"))
        print("| task | row | PEFT twin ex/s | " +
              " | ".join(f"leanback {s} ex/s | ratio (range)" for s in strategies) + " |")
        print("|---|---|---:|" + "---:|---:|" * len(strategies))
        tasks = list(dict.fromkeys(r["task"] for r in rs))  # in the order first run, rows as ROWS
        pairs = sorted(dict.fromkeys((r["task"], r["row"]) for r in rs),
                       key=lambda p: (tasks.index(p[0]), list(ROWS).index(p[1]) if p[1] in ROWS else len(ROWS)))
        for task, row in pairs:
            mine = [r for r in rs if (r["task"], r["row"]) == (task, row)]
            twin = {r["round"]: r["examples_per_s"] for r in mine if r["framework"] == "pytorch"}
            cells = [f"{statistics.median(twin.values()):.1f}" if twin else "-"]
            for s in strategies:
                lb = {r["round"]: r["examples_per_s"] for r in mine
                      if r["framework"] == "leanback" and r["strategy"] == s}
                ratios = [lb[k] / twin[k] for k in lb if k in twin]
                cells.append(f"{statistics.median(lb.values()):.1f}" if lb else "-")
                cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
                             if ratios else "-")
            print(f"| {task} | {ROWS.get(row, row)} | " + " | ".join(cells) + " |")
        print()


def main():
    args = sys.argv[1:]
    if "--speed" in args:
        args.remove("--speed")
        return speed_table(args[0] if args else os.path.join(HERE, "lora_speed.jsonl"))
    seeds, per_seed = "1,2,3", "--per-seed" in args
    args = [a for a in args if a != "--per-seed"]
    if "--seeds" in args:
        i = args.index("--seeds")
        seeds = args[i + 1]
        del args[i:i + 2]
    path = args[0] if args else os.path.join(HERE, "lora_study.jsonl")
    runs = [json.loads(l) for l in open(path) if l.strip()]
    if seeds != "all":
        keep = {int(s) for s in seeds.split(",")}
        runs = [r for r in runs if r["seed"] in keep]
    if per_seed:
        pairs = collections.defaultdict(dict)  # (task, row) -> seed -> {framework: value}
        for r in runs:
            pairs[(r["task"], r["row"])].setdefault(r["seed"], {})[r["framework"]] = r["value"]
        print("| task | row | seed | leanback | PEFT twin |\n|---|---|---:|---:|---:|")
        for (t, row), by_seed in pairs.items():
            for s in sorted(by_seed):
                v = by_seed[s]
                if "leanback" in v and "pytorch" in v:
                    print(f"| {t} | {ROWS[row]} | {s} | {100 * v['leanback']:.1f} | {100 * v['pytorch']:.1f} |")
        return
    by = collections.defaultdict(dict)  # (task, row, framework) -> seed -> run (latest wins)
    for r in runs:
        by[(r["task"], r["row"], r["framework"])][r["seed"]] = r
    cpus = sorted({f'{r["cpu"]}, {r["threads"]} thread(s)' for r in runs})
    most = collections.defaultdict(int)  # cpu -> the most threads any run used on it
    for r in runs:
        most[r["cpu"]] = max(most[r["cpu"]], int(r["threads"]))
    timed = lambda r: (int(r["threads"]) == most[r["cpu"]] >= 2 and
                       not (r["framework"] == "leanback" and r["row"] in PLAIN_LORA_ROWS and not has_fix(r["commit"])))
    print("CPU: " + "; ".join(cpus) + "; speed from the runs at " +
          ", ".join(f"{n} thread(s) on {c}" for c, n in sorted(most.items()) if n >= 2) +
          f" (leanback's plain-backward LoRA rows: from runs at {FIX} or later only)\n")
    print("| task | row | seeds | leanback metric | PEFT twin metric | leanback ex/s | twin ex/s | ratio "
          "| step ms | params / grads / optimizer / kept / activation peak MB "
          "| twin params / grads / optimizer / kept MB | twin max RSS MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|")
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    for t in tasks:
        for row, name in ROWS.items():
            lb = by.get((t, row, "leanback"), {})
            tw = by.get((t, row, "pytorch"), {})
            if not lb and not tw:
                continue
            metric = next(iter((lb or tw).values()))["metric"] or ""
            ratio = "-"
            same = [s for s in lb if s in tw and timed(lb[s]) and timed(tw[s]) and
                    (lb[s]["cpu"], lb[s]["threads"]) == (tw[s]["cpu"], tw[s]["threads"])]
            if same:
                ratio = "{:.2f}x".format(statistics.mean(lb[s]["examples_per_s"] for s in same) /
                                         statistics.mean(tw[s]["examples_per_s"] for s in same))
            mem = "-"
            if lb:
                worst = max(lb.values(), key=lambda r: r["activation_peak_bytes"])
                tags = worst.get("peak_bytes_by_tag") or {}
                # kept_bytes_max: recorded since the twin measures its kept bytes; before, the
                # bytes kept at the moment of the peak (the end of a forward or just after)
                kept = max(r.get("kept_bytes_max") or (r.get("peak_bytes_by_tag") or {}).get("saved", 0)
                           for r in lb.values())
                mem = " / ".join(mb(tags.get(k, 0)) for k in ("parameter", "gradient", "optimizer")) + \
                    " / " + mb(kept) + " / " + mb(worst["activation_peak_bytes"])
            twin_mem = "-"
            if tw and all("kept_mb" in r for r in tw.values()):
                twin_mem = " / ".join(f"{max(r[k] for r in tw.values()):.1f}"
                                      for k in ("params_mb", "grads_mb", "optimizer_mb", "kept_mb"))
            print(f"| {t} ({metric.replace('eval_', '')}) | {name} | {len(lb) or len(tw)} "
                  f"| {mean_std([r['value'] for r in lb.values()], 100)} "
                  f"| {mean_std([r['value'] for r in tw.values()], 100)} "
                  f"| {mean_std([r['examples_per_s'] for r in lb.values() if timed(r)])} "
                  f"| {mean_std([r['examples_per_s'] for r in tw.values() if timed(r)])} | {ratio} "
                  f"| {mean_std([r.get('step_ms_median') for r in lb.values() if timed(r)])} | {mem} | {twin_mem} "
                  f"| {mean_std([r.get('max_rss_mb') for r in tw.values()])} |")


if __name__ == "__main__":
    main()
