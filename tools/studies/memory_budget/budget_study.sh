#!/usr/bin/env bash
# The memory-budget accuracy study: for each GLUE task, seed and budget,
# `leanback train configs/minilm_TASK.json --seed S [--activation-budget B]` (a TASK with no such
# config names one of its own: vit_tiny_cifar10, resnet18_cifar10) and one JSON line
# appended to OUT: the final dev metric, the largest measured activation peak of any training
# step, the median step time, the plan (blocks per choice), the CPU and thread count.
#   TASKS="wnli mrpc" SEEDS="1 2 3" BUDGETS="exact 288MB 115.2MB" tools/studies/memory_budget/budget_study.sh [OUT]
# "exact" is vanilla with no budget (every kept tensor exact; leanback's backward keeps the
# lean set, numerically identical to keeping every input). 288MB and 115.2MB are a quarter
# and a tenth of the 1152 MB PyTorch + transformers keeps on the same 32 x 128 batch
# (tools/bench/minilm_step_torch.py); for ViT-tiny at batch 128, 311MB and 124.4MB of PyTorch's
# 1244 MB (tools/bench/vit_tiny.py --batch 128), for ResNet-18 150.4MB and 60.2MB of its 601.7 MB
# (tools/bench/resnet18.py --batch 128). Run directories are runs/budget_study/TASK/BUDGET/seedS
# (outside git); a finished one is skipped, an interrupted one resumed, so the study runs in
# parts. Each budget is planned once per task (`leanback plan --json` into
# runs/budget_study/TASK/BUDGET/plan.json) and every seed trains under that plan
# (--memory-plan). THREADS=N and CORE=C pin the runs (OMP_NUM_THREADS=N, taskset -c C) to share the
# machine; SETS="train.epochs=3 ..." passes --set for each (recorded with the line, whose task and
# run directory are then TASK-SETS: runs/budget_study/vit_tiny_cifar10-train.epochs-3/...); LB picks
# the binary (copy it elsewhere first when rebuilding meanwhile).
# tools/studies/memory_budget/budget_table.py OUT prints the table.
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/memory_budget/budget_study.jsonl}"
lb="${LB:-build/leanback}"
source tools/bench/run_env.sh  # pin, cpu, commit, plan_once
for seed in ${SEEDS:-1}; do
  for task in ${TASKS:-wnli mrpc cola stsb rte sst2}; do
    for budget in ${BUDGETS:-exact 115.2MB 288MB}; do
      name="$task"
      [ -n "${SETS:-}" ] && name="$task-$(echo "$SETS" | tr ' =' '+-')"
      dir="runs/budget_study/$name/$budget/seed$seed"
      [ -f "$dir/eval_results.json" ] && continue
      config="configs/minilm_$task.json"
      [ -f "$config" ] || config="configs/$task.json"
      args=(train "$config" --seed "$seed" --no-progress)
      for s in ${SETS:-}; do args+=(--set "$s"); done
      if [ "$budget" != exact ]; then
        plan="runs/budget_study/$name/$budget/plan.json"
        sets=()
        for s in ${SETS:-}; do sets+=(--set "$s"); done
        if ! plan_once "$plan" "$dir.log" "$config" "$budget" "${sets[@]}"; then
          echo "budget_study.sh: planning $task $budget failed; see $dir.log" >&2
          continue
        fi
        args+=(--memory-plan "$plan")
      fi
      # A run with a checkpoint resumes; one that stopped before any (a planner error) starts again.
      if compgen -G "$dir/checkpoint-*" > /dev/null; then args+=(--resume "$dir")
      else mkdir -p "$(dirname "$dir")"; args+=(--out "$dir" --overwrite); fi
      start=$(date +%s)
      if ! "${pin[@]}" "$lb" "${args[@]}" >> "$dir.log" 2>&1; then
        echo "budget_study.sh: $task $budget seed $seed failed; see $dir.log" >&2
        continue
      fi
      python3 - "$dir" "$name" "$budget" "$seed" "$cpu" "${OMP_NUM_THREADS:-all}" "$commit" "$(( $(date +%s) - start ))" "${SETS:-}" >> "$out" <<'EOF'
import collections, json, os, statistics, sys
d, task, budget, seed, cpu, threads, commit, wall, sets = sys.argv[1:10]
res = json.load(open(os.path.join(d, "eval_results.json")))
lines = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
steps = [s for s in lines if s.get("type") == "train"]
by_length = {}  # steps per plan (batch length), summed over the run's parts
for s in lines:
    if s.get("type") == "memory_plan_steps":
        for k, n in s["steps"].items():
            by_length[k] = by_length.get(k, 0) + n
plan = ""
p = os.path.join(d, "memory_plan.json")
if os.path.exists(p):
    parts = json.load(open(p)).get("parts", [])
    kept = lambda x: (("recompute in bf16" if x.get("bf16_products") else "recompute") + (" + " + x["codec"] if x["codec"] != "f32" else "")) if x["recompute"] else ("exact" if x["codec"] == "f32" else x["codec"])
    name = lambda x: x["strategy"] + ("" if kept(x) == "exact" else " + " + kept(x)) if x.get("strategy") else kept(x)
    blocks = collections.Counter(name(x) for x in parts if x["part"] != "(rest)")
    plan = ", ".join(f"{n} {k}" for k, n in blocks.items()) + "; " + ", ".join(name(x) for x in parts if x["part"] == "(rest)")
metric = res["primary_metric"]
print(json.dumps({
    "task": task, "budget": budget, "seed": int(seed), "metric": metric,
    "value": res["final"][metric],
    "activation_peak_bytes": max(s["activation_peak_bytes"] for s in steps),
    "step_ms_median": statistics.median(s["step_ms"] for s in steps),
    "steps": len(steps), "plan": plan, "steps_by_plan_length": by_length, "wall_s": int(wall),
    "cpu": cpu, "threads": threads, "commit": commit, **({"sets": sets} if sets else {})}))
EOF
      echo "budget_study.sh: $task $budget seed $seed done"
    done
  done
done
