#!/usr/bin/env bash
# The memory planner on the full-batch MiniLM step (the first MRPC batch padded to 32 x 128,
# f32): for each budget, `leanback plan --activation-budget B --json` and one line of a Markdown
# table — the plan (blocks per choice), predicted and measured activation peak, predicted step
# time against exact, the planner's own time; or the error a budget below reach gives.
# Needs the MiniLM (tools/fetch_pretrained.sh) and ../shared/data.
#   tools/studies/memory_budget/budget_grid.sh [LEANBACK] [CONFIG] [BUDGET...]
set -euo pipefail
lb=${1:-build/leanback}
config=${2:-configs/minilm_mrpc.json}
shift $(( $# > 2 ? 2 : $# ))
budgets=("$@")
[ ${#budgets[@]} -eq 0 ] && budgets=(288MB 200MB 150MB 115.2MB)
echo "| budget | plan (blocks per choice; rest) | predicted peak | measured peak | step ms, exact → planned (predicted) | planner |"
echo "|---|---|---:|---:|---:|---:|"
for b in "${budgets[@]}"; do
  if ! out=$("$lb" plan "$config" --activation-budget "$b" --json 2>&1); then
    echo "| $b | ${out##*error: } | | | | |"
    continue
  fi
  python3 -c '
import collections, json, sys
p = json.loads(sys.argv[2])
name = lambda x: ("recompute" + (" + " + x["codec"] if x["codec"] != "f32" else "")) if x["recompute"] else ("exact" if x["codec"] == "f32" else x["codec"])
blocks = collections.Counter(name(x) for x in p["parts"] if x["part"] != "(rest)")
rest = [name(x) for x in p["parts"] if x["part"] == "(rest)"][0]
plan = ", ".join(f"{n} {k}" for k, n in blocks.items()) + f"; {rest}"
mb = lambda v: f"{v / 1e6:.1f} MB"
pred, meas, exact_ms, ms, secs = (p[k] for k in ("predicted_peak_bytes", "measured_peak_bytes", "exact_step_ms", "predicted_step_ms", "profile_s"))
print(f"| {sys.argv[1]} | {plan} | {mb(pred)} | {mb(meas)} | {exact_ms:.0f} → {ms:.0f} | {secs:.0f} s |")' "$b" "$out"
done
