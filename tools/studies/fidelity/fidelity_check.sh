#!/usr/bin/env bash
# Does the gradient probe predict what a lossy backward costs in accuracy? Per GLUE task and
# strategy, the probe (train.grad_probe_every) at steps 0-3 of `configs/minilm_TASK.json` as
# the study trains it (its first four batches, after calibration): the mean over the probes
# and the compressed Linear layers of the local and end-to-end g_w / g_x cosines against the
# exact backward, and the lowest end-to-end g_w cosine. One JSON line per (task, strategy)
# appended to OUT; fidelity_table.py (beside this script) OUT joins them with the fidelity
# study's accuracy (3 seeds, results/full/TASK/report.json here) and prints how well 1 - cos
# predicts the loss. Needs the MiniLM (tools/fetch_pretrained.sh) and ../shared/data.
#   TASKS="cola sst2 mrpc stsb rte wnli" STRATEGIES="hot instant" tools/studies/fidelity/fidelity_check.sh [OUT]
# THREADS=N and CORE=C pin the runs (OMP_NUM_THREADS, taskset -c); LB picks the binary.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/fidelity/fidelity_probe.jsonl}"
lb="${LB:-build/leanback}"
source tools/bench/run_env.sh  # pin, cpu, commit
for task in ${TASKS:-cola sst2 mrpc stsb rte wnli}; do
  for s in ${STRATEGIES:-hot instant}; do
    dir="runs/fidelity_probe/$task/$s"
    mkdir -p "$(dirname "$dir")"
    if ! "${pin[@]}" "$lb" train "configs/minilm_$task.json" --strategy "$s" --out "$dir" --overwrite --no-progress \
        --set train.max_steps=4 --set train.grad_probe_every=1 > "$dir.log" 2>&1; then
      echo "fidelity_check.sh: $task $s failed; see $dir.log" >&2
      continue
    fi
    python3 - "$dir/metrics.jsonl" "$task" "$s" "$cpu" "${OMP_NUM_THREADS:-all}" "$commit" >> "$out" <<'PY'
import json, statistics, sys
path, task, s, cpu, threads, commit = sys.argv[1:7]
layers = [l for line in open(path) if (m := json.loads(line))["type"] == "probe" for l in m["layers"]
          if l.get("probed", True)]
def mean(where, g):
    xs = [l[where][g]["cos"] for l in layers if g in l.get(where, {})]
    return statistics.mean(xs) if xs else None
e2e = [l for l in layers if "g_w" in l.get("end_to_end", {})]
low = min(e2e, key=lambda l: l["end_to_end"]["g_w"]["cos"]) if e2e else None
probes = sum(1 for line in open(path) if json.loads(line)["type"] == "probe")
print(json.dumps({"task": task, "strategy": s, "probes": probes, "layers": len(layers),
                  "g_w_cos_local": mean("local", "g_w"), "g_x_cos_local": mean("local", "g_x"),
                  "g_w_cos_end_to_end": mean("end_to_end", "g_w"), "g_x_cos_end_to_end": mean("end_to_end", "g_x"),
                  "lowest_g_w_cos_end_to_end": low["end_to_end"]["g_w"]["cos"] if low else None,
                  "lowest_layer": low["layer"] if low else None,
                  "cpu": cpu, "threads": threads, "commit": commit}))
PY
    echo "fidelity_check.sh: $task $s done"
  done
done
