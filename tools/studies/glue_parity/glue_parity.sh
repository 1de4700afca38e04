#!/usr/bin/env bash
# GLUE parity runs: for each task and seed, `leanback train configs/minilm_TASK.json --seed S`
# and its PyTorch + transformers twin (tools/bench/glue_twin.py) back to back, appending one
# JSON line per run (final dev metrics, examples/s, minutes per epoch, CPU) to OUT.
#   TASKS="mrpc rte" SEEDS="1 2 3" tools/studies/glue_parity/glue_parity.sh [OUT]
# FRAMEWORKS="pytorch" (or "leanback") runs only that side, e.g. to finish a pair.
# THREADS=N sets both sides' thread count (leanback OMP_NUM_THREADS, the twin's --threads;
# default: leanback all cores, the twin 2), e.g. to run on one core beside other work.
# Needs tools/fetch_pretrained.sh done, ../shared/data/glue, and a Python with torch and
# transformers (PYTHON, default python3).
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/glue_parity/glue_parity.jsonl}"
python="${PYTHON:-python3}"
lb="${LB:-build/leanback}"
twin_threads=()
if [ -n "${THREADS:-}" ]; then
  export OMP_NUM_THREADS="$THREADS"
  twin_threads=(--threads "$THREADS")
fi
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"  # the leanback the runs measure
for task in ${TASKS:-mrpc rte stsb cola sst2}; do
  for seed in ${SEEDS:-1}; do
    run="runs/parity/${task}_seed${seed}"
    mkdir -p runs/parity
    frameworks="${FRAMEWORKS:-leanback pytorch}"
    if [[ " $frameworks " != *" leanback "* ]]; then
      :
    elif "$lb" train "configs/minilm_${task}.json" --seed "$seed" --out "$run" --overwrite --no-progress \
         > "$run.log" 2>&1 || { mkdir -p "$(dirname "$run")"; false; }; then
      python3 - "$run/eval_results.json" "$task" "$seed" "$cpu" "$commit" >> "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
final = {k: v for k, v in r["final"].items() if k.startswith("eval_")}
print(json.dumps({"framework": "leanback", "task": sys.argv[2], "seed": int(sys.argv[3]), "final": final,
                  "examples_per_s": r["train_samples_per_second"], "minutes_per_epoch": r["minutes_per_epoch"],
                  "cpu": sys.argv[4], "commit": sys.argv[5]}))
PY
    else
      echo "leanback $task seed $seed failed; see $run.log" >&2
    fi
    [[ " $frameworks " == *" pytorch "* ]] || continue
    "$python" tools/bench/glue_twin.py "configs/minilm_${task}.json" --seed "$seed" "${twin_threads[@]}" 2> "runs/parity/${task}_seed${seed}_torch.log" \
      | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['cpu']='$cpu'; print(json.dumps(r))" >> "$out" \
      || echo "pytorch $task seed $seed failed" >&2
  done
done
