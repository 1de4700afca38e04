#!/usr/bin/env python3
"""Prints the process-memory study's table from its JSON lines (run.sh): per case, max RSS,
the whole-step allocator peak, the difference and whether the target holds.
Usage: python3 tools/studies/process_memory/table.py [results.jsonl]"""
import json, sys

path = sys.argv[1] if len(sys.argv) > 1 else __file__.rsplit("/", 1)[0] + "/results.jsonl"
rows = [json.loads(line) for line in open(path)]
print("CPU:", "; ".join(sorted({r["cpu"] for r in rows})), " commit:", "; ".join(sorted({r["commit"] for r in rows})))
print(f"{'case':18} {'max RSS MB':>10} {'step peak MB':>12} {'RSS - peak':>10}  target")
for r in rows:
    if "step_peak_mb" in r:
        print(f"{r['case']:18} {r['max_rss_mb']:10.1f} {r['step_peak_mb']:12.1f} {r['over_peak_mb']:10.1f}  "
              f"<= peak + {r['target_over_mb']} MB: {'yes' if r['ok'] else 'no'}")
    else:
        print(f"{r['case']:18} {r['max_rss_mb']:10.1f} {'':12} {'':10}  <= {r['target_mb']} MB: {'yes' if r['ok'] else 'no'}")
