#!/usr/bin/env python3
"""Markdown table of GLUE parity runs (glue_parity.sh's output, beside this script): per task,
the official dev metric of leanback and of the PyTorch twin as mean ± std over the seeds run,
their difference, and minutes per epoch / examples per second of each.

    python3 tools/studies/glue_parity/glue_table.py [tools/studies/glue_parity/glue_parity.jsonl]
"""
import json
import os
import statistics
import sys
from collections import defaultdict

# The metric each task is judged by (GLUE's; MRPC and STS-B: the mean of their two).
PRIMARY = {"cola": "eval_matthews_correlation", "sst2": "eval_accuracy", "mrpc": "eval_combined_score",
           "stsb": "eval_combined_score", "rte": "eval_accuracy", "wnli": "eval_accuracy",
           "qnli": "eval_accuracy", "qqp": "eval_combined_score", "mnli": "eval_accuracy"}


def fmt(xs, scale=100.0):
    if not xs:
        return "—"
    m = statistics.mean(xs) * scale
    s = statistics.stdev(xs) * scale if len(xs) > 1 else 0.0
    return f"{m:.1f} ± {s:.1f} (n={len(xs)})"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "glue_parity.jsonl")
    runs = defaultdict(lambda: defaultdict(list))
    speed = defaultdict(lambda: defaultdict(list))
    cpu = set()
    for line in open(path):
        r = json.loads(line)
        t, f = r["task"], r["framework"]
        runs[t][f].append(r["final"][PRIMARY[t]])
        speed[t][f].append((r["minutes_per_epoch"], r["examples_per_s"]))
        cpu.add(r.get("cpu", "?"))
    print(f"CPU: {', '.join(sorted(cpu))}; 2 threads each unless a run says otherwise, fp32\n")
    print("| task (metric ×100) | leanback | PyTorch + transformers | difference of means | min/epoch leanback / PyTorch | examples/s leanback / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|")
    for t in PRIMARY:
        if t not in runs:
            continue
        lb, pt = runs[t]["leanback"], runs[t]["pytorch"]
        diff = (statistics.mean(lb) - statistics.mean(pt)) * 100 if lb and pt else float("nan")
        sl = speed[t]["leanback"] or [(float("nan"), float("nan"))]
        sp = speed[t]["pytorch"] or [(float("nan"), float("nan"))]
        mpe = f"{statistics.mean(x[0] for x in sl):.1f} / {statistics.mean(x[0] for x in sp):.1f}"
        eps = f"{statistics.mean(x[1] for x in sl):.1f} / {statistics.mean(x[1] for x in sp):.1f}"
        print(f"| {t} ({PRIMARY[t][5:]}) | {fmt(lb)} | {fmt(pt)} | {diff:+.1f} | {mpe} | {eps} |")


if __name__ == "__main__":
    main()
