#!/usr/bin/env python3
"""Prints the optimizer-state study's table from its JSON lines (run.sh): per task and state
width, the final dev metric (x100, mean ± sd over seeds), the best, examples/s and max RSS.
Usage: python3 tools/studies/optimizer_state/table.py [results.jsonl]"""
import json, statistics, sys
from collections import defaultdict

path = sys.argv[1] if len(sys.argv) > 1 else __file__.rsplit("/", 1)[0] + "/results.jsonl"
rows = defaultdict(list)
cpus = set()
for line in open(path):
    r = json.loads(line)
    rows[(r["task"], r["state_bits"])].append(r)
    cpus.add(r["cpu"])

def ms(xs):
    return f"{100 * statistics.mean(xs):.2f} ± {100 * statistics.stdev(xs):.2f}" if len(xs) > 1 else f"{100 * xs[0]:.2f}"

print("CPU:", "; ".join(sorted(cpus)))
print(f"{'task':6} {'bits':>4} {'seeds':>5}  {'final metric (x100)':>20}  {'best (x100)':>16}  {'ex/s':>6}  {'max RSS MB':>10}")
for (task, bits) in sorted(rows, key=lambda k: (k[0], -k[1])):
    rs = rows[(task, bits)]
    metric = rs[0]["primary_metric"]
    final = [r["final"][metric] for r in rs]
    best = [r["best"] for r in rs]
    print(f"{task:6} {bits:>4} {len(rs):>5}  {ms(final):>20}  {ms(best):>16}  "
          f"{statistics.mean(r['train_samples_per_second'] for r in rs):6.1f}  "
          f"{statistics.mean(r['max_rss_mb'] for r in rs):10.0f}")
print("metric: each task's primary GLUE metric (mrpc: combined_score, rte: accuracy, ...), at the end and at the best evaluation")
