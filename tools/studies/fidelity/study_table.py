#!/usr/bin/env python3
"""Markdown table of the fidelity study (study.sh, beside this script): per GLUE task, each
strategy's dev metric as mean ± std over its seeds (×100), its difference from vanilla, and
the measured whole-model costs beside it (bytes the tape held for backward, mean over the logged steps;
backward time per optimizer step); then the average over the tasks present.

    python3 tools/studies/fidelity/study_table.py [tools/studies/fidelity/results/full]
"""
import json
import os
import sys

ORDER = ["cola", "sst2", "mrpc", "stsb", "rte", "wnli"]
STRATEGIES = ["vanilla", "instant", "hot"]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "full")
    tasks = [t for t in ORDER if os.path.exists(os.path.join(root, t, "report.json"))]
    if not tasks:
        sys.exit(f"study_table.py: no report.json under {root}/<task>/")
    print("| task (metric ×100) | vanilla | INSTANT | HOT | saved MiB vanilla / INSTANT / HOT "
          "| backward ms vanilla / INSTANT / HOT | seeds |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    sums = {s: [] for s in STRATEGIES}
    for t in tasks:
        r = json.load(open(os.path.join(root, t, "report.json")))
        metric = r["primary_metric"]
        by = {s["strategy"]: s for s in r["strategies"]}
        cells, saved, bwd, seeds = [], [], [], set()
        base = by.get("vanilla", {}).get("metrics", {}).get(metric)
        for name in STRATEGIES:
            s = by.get(name)
            m = s and s["metrics"].get(metric)
            if not m or not m.get("values"):
                cells.append("—")
                saved.append("—")
                bwd.append("—")
                continue
            seeds.add(len(m["values"]))
            text = f"{100 * m['mean']:.1f} ± {100 * m['std']:.1f}"
            if name != "vanilla" and base:
                text += f" ({100 * (m['mean'] - base['mean']):+.1f})"
            cells.append(text)
            sums[name].append(m["mean"])
            saved.append(f"{s['saved_bytes_mean']['mean'] / 2**20:.0f}")
            bwd.append(f"{s['backward_ms']['mean']:.0f}")
        short = metric.replace("eval_", "")
        print(f"| {t} ({short}) | {' | '.join(cells)} | {' / '.join(saved)} | {' / '.join(bwd)} | "
              f"{'/'.join(str(n) for n in sorted(seeds))} |")
    if all(len(v) == len(tasks) for v in sums.values()):
        avg = {k: 100 * sum(v) / len(v) for k, v in sums.items()}
        print(f"| **average of {len(tasks)} tasks** | {avg['vanilla']:.1f} | {avg['instant']:.1f} "
              f"({avg['instant'] - avg['vanilla']:+.1f}) | {avg['hot']:.1f} ({avg['hot'] - avg['vanilla']:+.1f}) | | | |")


if __name__ == "__main__":
    main()
