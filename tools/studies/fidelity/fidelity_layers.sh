#!/usr/bin/env bash
# Does the gradient probe predict the accuracy cost across layers? Per GLUE task, strategy
# and seed: `configs/minilm_TASK.json` trained to the end with the lossy strategy on one encoder
# block only (a backward rule `bert.encoder.layer.B.*`), once per block, and once exact, all
# from the same seed (same initialisation, data order and dropout masks), so each block's
# metric change is paired with the exact run's and the seeds' spread does not enter it. Each
# lossy run probes its own gradients (train.grad_probe_every=PROBE_EVERY, default 50: exact
# against lossy g_w / g_x, cosine per layer, local and end to end). One JSON line per run
# appended to OUT: the block, the final dev metric and loss, the run's mean probe cosines over
# its lossy layers; fidelity_layers_table.py (beside this script) OUT pairs them with the
# exact run and prints how well 1 - cos orders the blocks' losses.
#   TASKS="stsb" STRATEGIES="instant hot" SEEDS="1 2" BLOCKS="0 1 2 3 4 5" tools/studies/fidelity/fidelity_layers.sh [OUT]
# Runs go to runs/fidelity_layers/TASK/STRATEGY-blockB/seedS (and .../exact/seedS); a
# finished one is skipped. THREADS=N and CORE=C pin them (OMP_NUM_THREADS, taskset -c); LB
# picks the binary. Needs the MiniLM (tools/fetch_pretrained.sh) and ../shared/data.
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/fidelity/fidelity_layers.jsonl}"
lb="${LB:-build/leanback}"
probe_every="${PROBE_EVERY:-50}"
source tools/bench/run_env.sh  # pin, cpu, commit

run() {  # task seed strategy block (strategy "exact": no rule, no probe)
  local task="$1" seed="$2" s="$3" block="$4" name dir
  name="$s"
  [ "$s" != exact ] && name="$s-block$block"
  dir="runs/fidelity_layers/$task/$name/seed$seed"
  [ -f "$dir/eval_results.json" ] && return 0
  mkdir -p "$(dirname "$dir")"
  local args=(train "configs/minilm_$task.json" --seed "$seed" --out "$dir" --overwrite --no-progress)
  if [ "$s" != exact ]; then
    args+=(--set "backward.rules=[{\"match\": \"bert.encoder.layer.$block.*\", \"type\": \"$s\"}]"
           --set train.grad_probe_every="$probe_every")
  fi
  local start
  start=$(date +%s)
  if ! "${pin[@]}" "$lb" "${args[@]}" > "$dir.log" 2>&1; then
    echo "fidelity_layers.sh: $task $name seed $seed failed; see $dir.log" >&2
    return 0
  fi
  python3 - "$dir" "$task" "$s" "$block" "$seed" "$cpu" "${OMP_NUM_THREADS:-all}" "$commit" \
      "$(( $(date +%s) - start ))" >> "$out" <<'PY'
import json, os, statistics, sys
d, task, s, block, seed, cpu, threads, commit, wall = sys.argv[1:10]
res = json.load(open(os.path.join(d, "eval_results.json")))
metric = res["primary_metric"]
line = {"task": task, "strategy": s, "block": None if s == "exact" else int(block), "seed": int(seed),
        "metric": metric, "value": res["final"][metric], "eval_loss": res["final"]["eval_loss"]}
probes = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
layers = [l for p in probes if p.get("type") == "probe" for l in p["layers"] if l.get("probed", True)]
for where in ("local", "end_to_end"):
    for g in ("g_w", "g_x"):
        xs = [l[where][g]["cos"] for l in layers if g in l.get(where, {})]
        line[f"{g}_cos_{where}"] = statistics.mean(xs) if xs else None
line.update({"probes": sum(1 for p in probes if p.get("type") == "probe"), "probed_layers": len(layers),
             "cpu": cpu, "threads": threads, "commit": commit, "wall_s": int(wall)})
print(json.dumps(line))
PY
}

for seed in ${SEEDS:-1}; do
  for task in ${TASKS:-stsb}; do
    run "$task" "$seed" exact 0
    for s in ${STRATEGIES:-instant}; do
      for b in ${BLOCKS:-0 1 2 3 4 5}; do run "$task" "$seed" "$s" "$b"; done
    done
  done
done
