#!/usr/bin/env python3
"""Does the gradient probe predict the accuracy cost across layers? Reads the runs of
fidelity_layers.sh (beside this script: one lossy encoder block per run, and the exact run of
the same seed), prints per (task, strategy) each block's probe figures (1 - cos, mean over the run's
probes and the block's Linear layers) beside its paired change of the final dev metric (x100)
and dev loss against the exact run, averaged over the seeds; then, across the blocks, the rank
(Spearman) and linear (Pearson) correlation of each probe figure with the metric's change (a
good predictor: strongly negative, more gradient error, more loss) and with the dev loss's
change (strongly positive).

    tools/studies/fidelity/fidelity_layers_table.py [tools/studies/fidelity/fidelity_layers.jsonl]
"""
import collections
import json
import os
import statistics
import sys

from fidelity_table import pearson, ranks

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = [("g_w_cos_end_to_end", "g_w end to end"), ("g_x_cos_end_to_end", "g_x end to end"),
           ("g_w_cos_local", "g_w local"), ("g_x_cos_local", "g_x local")]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fidelity_layers.jsonl")
    lines = [json.loads(l) for l in open(path) if l.strip()]
    exact = {(l["task"], l["seed"]): l for l in lines if l["strategy"] == "exact"}
    rows = collections.defaultdict(list)  # (task, strategy, block) -> paired runs
    for l in lines:
        if l["strategy"] != "exact" and (l["task"], l["seed"]) in exact:
            rows[(l["task"], l["strategy"], l["block"])].append((l, exact[(l["task"], l["seed"])]))
    cpus = sorted({l["cpu"] + ", " + str(l["threads"]) + " thread(s)" for l in lines})
    print("CPU: " + "; ".join(cpus) + "\n")
    print("| task (metric x100) | strategy | block | seeds | " + " | ".join(f"1 - cos {n}" for _, n in FIGURES)
          + " | metric change | dev loss change |")
    print("|---|---|---:|---:|" + "---:|" * len(FIGURES) + "---:|---:|")
    groups = collections.defaultdict(list)  # (task, strategy) -> per block figures and changes
    for (task, s, block), pairs in sorted(rows.items()):
        err = {k: statistics.mean(1 - p[k] for p, _ in pairs) for k, _ in FIGURES if all(p[k] is not None for p, _ in pairs)}
        dm = statistics.mean(100 * (p["value"] - e["value"]) for p, e in pairs)
        dl = statistics.mean(p["eval_loss"] - e["eval_loss"] for p, e in pairs)
        groups[(task, s)].append((err, dm, dl))
        cells = " | ".join(f"{err[k]:.4f}" if k in err else "-" for k, _ in FIGURES)
        print(f"| {task} ({pairs[0][0]['metric']}) | {s} | {block} | {len(pairs)} | {cells} | {dm:+.2f} | {dl:+.4f} |")
    for (task, s), blocks in sorted(groups.items()):
        if len(blocks) < 3:
            continue
        print(f"\n{task}, {s}, across {len(blocks)} blocks:\n")
        print("| probe figure (1 - cos) | Spearman with metric change | Pearson | Spearman with dev loss change | Pearson |")
        print("|---|---:|---:|---:|---:|")
        for k, name in FIGURES:
            xs = [b[0][k] for b in blocks if k in b[0]]
            if len(xs) != len(blocks):
                continue
            dm = [b[1] for b in blocks]
            dl = [b[2] for b in blocks]
            print(f"| {name} | {pearson(ranks(xs), ranks(dm)):+.2f} | {pearson(xs, dm):+.2f} | "
                  f"{pearson(ranks(xs), ranks(dl)):+.2f} | {pearson(xs, dl):+.2f} |")


if __name__ == "__main__":
    main()
