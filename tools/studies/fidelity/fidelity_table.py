#!/usr/bin/env python3
"""Does the gradient probe predict a lossy backward's accuracy cost? Joins the probe's cosines
per task and strategy (fidelity_check.sh, beside this script) with the fidelity study's final
dev metric (study.sh, full setting: mean over its seeds, x100, against vanilla's) and prints,
per (task, strategy), 1 - cos (the planner's fidelity cost) beside the metric's change and
the seeds' spread; then, over all pairs, the rank correlation (Spearman) and the linear one
(Pearson) between each probe figure's 1 - cos and the metric's change. A good predictor has a
strongly negative correlation (more gradient error, more loss).

    tools/studies/fidelity/fidelity_table.py [tools/studies/fidelity/fidelity_probe.jsonl] [STUDY_DIR]
"""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = [("g_w_cos_end_to_end", "g_w end to end"), ("g_x_cos_end_to_end", "g_x end to end"),
           ("g_w_cos_local", "g_w local"), ("g_x_cos_local", "g_x local"),
           ("lowest_g_w_cos_end_to_end", "lowest layer's g_w end to end")]


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def pearson(xs, ys):
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")


def study_deltas(study_dir, task):
    path = os.path.join(study_dir, task, "report.json")
    if not os.path.exists(path):
        return {}
    r = json.load(open(path))
    metric = r["primary_metric"]
    by = {s["strategy"]: s["metrics"][metric] for s in r["strategies"] if metric in s.get("metrics", {})}
    if "vanilla" not in by:
        return {}
    base = by["vanilla"]
    out = {}
    for s, m in by.items():
        if s == "vanilla":
            continue
        out[s] = {"metric": metric.replace("eval_", ""), "delta": 100 * (m["mean"] - base["mean"]),
                  "std": 100 * m.get("std", 0.0), "vanilla_std": 100 * base.get("std", 0.0),
                  "seeds": len(m.get("values", []))}
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fidelity_probe.jsonl")
    study_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "results", "full")
    probes = {}
    for line in open(path):
        if line.strip():
            p = json.loads(line)
            probes[(p["task"], p["strategy"])] = p  # the latest line wins
    rows = []
    for (task, s), p in probes.items():
        d = study_deltas(study_dir, task).get(s)
        if d:
            rows.append((task, s, p, d))
    cpus = sorted({f'{p["cpu"]}, {p["threads"]} thread(s)' for p in probes.values()})
    print("Probe: " + "; ".join(cpus) + "\n")
    print("| task (metric) | strategy | 1 - cos g_w end to end | 1 - cos g_x end to end | 1 - cos g_w local "
          "| lowest g_w cos (layer) | metric change x100 (seeds) | seeds' std strategy / vanilla |")
    print("|---|---|---:|---:|---:|---|---:|---|")
    for task, s, p, d in sorted(rows, key=lambda r: (r[1], r[0])):
        print(f"| {task} ({d['metric']}) | {s} | {1 - p['g_w_cos_end_to_end']:.3f} | {1 - p['g_x_cos_end_to_end']:.4f} "
              f"| {1 - p['g_w_cos_local']:.3f} | {p['lowest_g_w_cos_end_to_end']:.3f} ({p['lowest_layer']}) "
              f"| {d['delta']:+.1f} ({d['seeds']}) | {d['std']:.1f} / {d['vanilla_std']:.1f} |")
    if len(rows) < 3:
        return
    delta = [r[3]["delta"] for r in rows]
    print(f"\nCorrelation with the metric's change over {len(rows)} (task, strategy) pairs "
          "(negative: more gradient error, more loss):\n")
    print("| probe figure (1 - cos) | Spearman | Pearson |")
    print("|---|---:|---:|")
    for key, name in FIGURES:
        err = [1 - r[2][key] for r in rows]
        print(f"| {name} | {pearson(ranks(err), ranks(delta)):+.2f} | {pearson(err, delta):+.2f} |")
    # Without the tasks whose seeds spread more than the changes measured (WNLI: 71 dev
    # examples, std 5-9 points): does the probe rank what is left?
    steady = [r for r in rows if max(r[3]["std"], r[3]["vanilla_std"]) <= 4.0]
    if 3 <= len(steady) < len(rows):
        err = [1 - r[2]["g_w_cos_end_to_end"] for r in steady]
        d = [r[3]["delta"] for r in steady]
        print(f"\nWithout pairs whose seeds' std exceeds 4 points ({len(steady)} left), g_w end to end: "
              f"Spearman {pearson(ranks(err), ranks(d)):+.2f}, Pearson {pearson(err, d):+.2f}")
    for s in sorted({r[1] for r in rows}):
        for name, pool in (("", rows), (", steady tasks", steady)):
            sub = [r for r in pool if r[1] == s]
            if len(sub) >= 3:
                err = [1 - r[2]["g_w_cos_end_to_end"] for r in sub]
                d = [r[3]["delta"] for r in sub]
                print(f"\n{s} alone ({len(sub)} tasks{name}), g_w end to end: "
                      f"Spearman {pearson(ranks(err), ranks(d)):+.2f}, Pearson {pearson(err, d):+.2f}")


if __name__ == "__main__":
    main()
