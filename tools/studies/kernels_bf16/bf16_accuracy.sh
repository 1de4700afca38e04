#!/usr/bin/env bash
# bf16 training accuracy (train.precision "bf16"): `leanback train configs/minilm_TASK.json`
# per task, strategy and seed in bf16, one JSON line each (final dev metrics, throughput, CPU,
# commit) appended to OUT. Its fp32 references are the fidelity study's runs of the same
# config, strategy and seed (tools/studies/fidelity/study.sh, SETTING=full), or PRECISION=f32 runs of
# this script (same binary and thread count, lines marked "precision": "f32").
#   TASKS="mrpc sst2" SEEDS="1 2 3" STRATEGIES="vanilla hot" tools/studies/kernels_bf16/bf16_accuracy.sh [OUT]
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/kernels_bf16/bf16_accuracy.jsonl}"
lb="${LB:-build/leanback}"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
precision="${PRECISION:-bf16}"
case "$precision" in bf16|f32) ;; *) echo "bf16_accuracy.sh: PRECISION must be bf16 or f32, got '$precision'" >&2; exit 2 ;; esac
for task in ${TASKS:-mrpc}; do
  for strategy in ${STRATEGIES:-vanilla}; do
    for seed in ${SEEDS:-1}; do
      run="runs/$precision/$task/$strategy/seed-$seed"
      mkdir -p "$(dirname "$run")"
      if "$lb" train "configs/minilm_${task}.json" --strategy "$strategy" --seed "$seed" \
           --set "train.precision=$precision" --out "$run" --overwrite --no-progress > "$run.log" 2>&1; then
        python3 - "$run/eval_results.json" "$task" "$strategy" "$seed" "$cpu" "$commit" "${OMP_NUM_THREADS:-all}" "$precision" >> "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
final = {k: v for k, v in r["final"].items() if k.startswith("eval_")}
print(json.dumps({"precision": sys.argv[8], "task": sys.argv[2], "strategy": sys.argv[3], "seed": int(sys.argv[4]),
                  "final": final, "examples_per_s": r["train_samples_per_second"],
                  "cpu": sys.argv[5], "commit": sys.argv[6], "threads": sys.argv[7]}))
PY
      else
        echo "bf16_accuracy.sh: $precision $task $strategy seed $seed failed; see $run.log" >&2
      fi
    done
  done
done
