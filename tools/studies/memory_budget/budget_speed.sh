#!/usr/bin/env bash
# What a memory budget costs in step time, paired: per GLUE task, STEPS training steps of
# `configs/minilm_TASK.json` (a TASK with no such config names one of its own, as in
# budget_study.sh: vit_tiny_cifar10, resnet18_cifar10) exact and under each budget's plan (the budget study's plan.json,
# made once: tools/bench/run_env.sh plan_once), from the same seed (the same batches), run
# one after the other in ROUNDS rounds with the order turned each round, so that a change in
# what else the machine runs weighs on both. Per run the median step time over its steps after
# the first WARMUP; one JSON line per (task, budget, round) appended to OUT with both medians and
# their ratio; the table (budget_table.py --speed OUT, beside this script): per task and
# budget, the median of the rounds' ratios and their range.
#   TASKS="mrpc rte" BUDGETS="115.2MB 288MB" ROUNDS=3 STEPS=40 tools/studies/memory_budget/budget_speed.sh [OUT]
# TWIN=1 adds, in each round, PyTorch + transformers with every encoder layer checkpointed
# (tools/bench/glue_twin.py --gradient-checkpointing, PY: a Python with torch and transformers)
# on the same batches (--order leanback): the anchor at the memory PyTorch reaches (GLUE only).
# SETS="train.epochs=3" finds the plans where budget_study.sh made them with those sets
# (runs/budget_study/TASK-SETS/BUDGET/plan.json); a BUDGET naming a directory there that holds a
# plan.json (a plan kept from an earlier planner, say) times that plan.
# THREADS=N and CORE=C pin the runs (OMP_NUM_THREADS, taskset -c); LB picks the binary. Runs
# go to runs/budget_speed/TASK/NAME (outside git, replaced each round).
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/memory_budget/budget_speed.jsonl}"
lb="${LB:-build/leanback}"
steps="${STEPS:-40}"
warmup="${WARMUP:-5}"
source tools/bench/run_env.sh  # pin, cpu, commit, plan_once

median_ms() {  # run directory: the median step time after the warm-up steps
  python3 - "$1/metrics.jsonl" "$warmup" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
ms = [s["step_ms"] for s in steps if s.get("type") == "train"][int(sys.argv[2]):]
print(statistics.median(ms))
PY
}

twin() {  # task: STEPS steps of the checkpointed PyTorch twin; prints its median step ms
  local task="$1" log="runs/budget_speed/$1/torch_checkpointed.log"
  mkdir -p "$(dirname "$log")"
  if ! "${pin[@]}" "${PY:-python3}" tools/bench/glue_twin.py "configs/minilm_$task.json" --seed 1 \
       --threads "${OMP_NUM_THREADS:-2}" --order leanback --max-steps "$steps" --log-steps --gradient-checkpointing \
       > "$log" 2>&1; then
    echo "budget_speed.sh: $task PyTorch twin failed; see $log" >&2
    return 1
  fi
  python3 - "$log" "$warmup" <<'PY'
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if l.startswith('{"step"')][int(sys.argv[2]):]
print(statistics.median(ms))
PY
}

config_of() {  # task: its config, as budget_study.sh finds it
  if [ -f "configs/minilm_$1.json" ]; then echo "configs/minilm_$1.json"; else echo "configs/$1.json"; fi
}

run() {  # task name [--memory-plan FILE]: one run of STEPS steps; prints its median step ms
  local task="$1" name="$2" dir
  shift 2
  dir="runs/budget_speed/$task/$name"
  mkdir -p "$(dirname "$dir")"
  if ! "${pin[@]}" "$lb" train "$(config_of "$task")" --seed 1 --out "$dir" --overwrite --no-progress \
       --set train.max_steps="$steps" --set train.log_every=1 --set data.max_eval_examples=32 "$@" \
       > "$dir.log" 2>&1; then
    echo "budget_speed.sh: $task $name failed; see $dir.log" >&2
    return 1
  fi
  median_ms "$dir"
}

for task in ${TASKS:-wnli mrpc cola stsb rte sst2}; do
  name="$task"
  [ -n "${SETS:-}" ] && name="$task-$(echo "$SETS" | tr ' =' '+-')"
  for budget in ${BUDGETS:-115.2MB}; do
    plan="runs/budget_study/$name/$budget/plan.json"
    if ! plan_once "$plan" "runs/budget_study/$name/$budget/plan.log" "$(config_of "$task")" "$budget"; then
      echo "budget_speed.sh: planning $task $budget failed; see runs/budget_study/$name/$budget/plan.log" >&2
      continue
    fi
    for r in $(seq 1 "${ROUNDS:-3}"); do
      torch_ms=""
      if (( r % 2 )); then
        exact=$(run "$task" exact) || continue
        planned=$(run "$task" "$budget" --memory-plan "$plan") || continue
        if [ -n "${TWIN:-}" ]; then torch_ms=$(twin "$task") || torch_ms=""; fi
      else
        if [ -n "${TWIN:-}" ]; then torch_ms=$(twin "$task") || torch_ms=""; fi
        planned=$(run "$task" "$budget" --memory-plan "$plan") || continue
        exact=$(run "$task" exact) || continue
      fi
      python3 - "$task" "$budget" "$r" "$exact" "$planned" "$steps" "$warmup" "$cpu" "${OMP_NUM_THREADS:-all}" \
          "$commit" "$(cut -d' ' -f1 /proc/loadavg)" "$torch_ms" >> "$out" <<'PY'
import json, sys
task, budget, r, exact, planned, steps, warmup, cpu, threads, commit, load, torch_ms = sys.argv[1:13]
line = {"task": task, "budget": budget, "round": int(r), "exact_step_ms": float(exact),
        "planned_step_ms": float(planned), "ratio": float(planned) / float(exact)}
if torch_ms:
    line.update({"torch_checkpointed_step_ms": float(torch_ms), "ratio_to_torch": float(planned) / float(torch_ms)})
line.update({"steps": int(steps), "warmup": int(warmup), "load_average": float(load),
             "cpu": cpu, "threads": threads, "commit": commit})
print(json.dumps(line))
PY
      echo "budget_speed.sh: $task $budget round $r: exact $exact ms, planned $planned ms${torch_ms:+, PyTorch checkpointed $torch_ms ms}"
    done
  done
done
python3 tools/studies/memory_budget/budget_table.py --speed "$out"
