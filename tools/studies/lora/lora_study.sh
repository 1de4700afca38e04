#!/usr/bin/env bash
# The LoRA study: MiniLM on GLUE tasks, per seed, full fine-tuning against LoRA (r 8, alpha
# 16, dropout 0.1, lr 5e-4 as configs/minilm_mrpc_lora.json) on query/value ("lora") and on
# every encoder Linear ("lora_all"), and LoRA under HOT / INSTANT ("lora_hot",
# "lora_instant"), and LoRA on query/value at a memory budget ("lora_budget": BUDGET, default
# 115.2MB, a tenth of the activations PyTorch keeps for full fine-tuning on the 32 x 128
# batch; planned once per task into runs/lora_study/TASK/lora_budget/plan.json, every seed
# trained under it), and LoRA on query/value with the adapters' dropout off ("lora_nodrop": the
# model's own dropout stays); with TWIN=1 also the PyTorch + PEFT twin (tools/bench/glue_twin.py,
# same generated config) of full, lora, lora_all and lora_nodrop. One JSON line per run appended to OUT: the
# final dev metric, examples/s, median step time, the largest measured activation peak and the
# memory tags of the step with it, the most bytes kept for backward at the end of a forward
# (the twin: the same through saved_tensors_hooks, and its parameter, gradient and optimizer
# bytes), the CPU and thread count.
#   TASKS="mrpc rte" SEEDS="1 2 3" ROWS="full lora lora_all lora_hot lora_instant lora_budget" TWIN=1 \
#     tools/studies/lora/lora_study.sh [OUT]
# FRAMEWORKS="leanback pytorch" (the default) picks whose runs to make: FRAMEWORKS=pytorch adds
# the twins of leanback runs made elsewhere, and leaves their records as they are.
# THREADS=N and CORE=C pin both frameworks (OMP_NUM_THREADS / --threads, taskset); LB picks
# the leanback binary, PY the Python with torch, transformers and peft. Runs go to
# runs/lora_study/TASK/ROW/seedS (outside git); a finished one is skipped.
set -uo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/lora/lora_study.jsonl}"
lb="${LB:-build/leanback}"
py="${PY:-python3}"
threads="${THREADS:-2}"
THREADS="$threads"
source tools/bench/run_env.sh  # OMP_NUM_THREADS, pin, cpu, commit, plan_once

# The row's config: the task's, with the LoRA recipe where the row has one.
make_config() {  # task row file
  python3 tools/bench/lora_config.py "$1" "$2" "$3"
}

has_twin() {  # row: the rows with a PyTorch + PEFT twin
  case "$1" in full|lora|lora_all|lora_nodrop) return 0 ;; *) return 1 ;; esac
}

record() {  # dir task row seed framework wall
  python3 - "$@" "$cpu" "$threads" "$commit" >> "$out" <<'EOF'
import json, os, statistics, sys
d, task, row, seed, fw, wall, cpu, threads, commit = sys.argv[1:10]
line = {"task": task, "row": row, "seed": int(seed), "framework": fw, "wall_s": int(wall),
        "cpu": cpu, "threads": threads, "commit": commit}
if fw == "leanback":
    res = json.load(open(os.path.join(d, "eval_results.json")))
    steps = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    steps = [s for s in steps if s.get("type") == "train"]
    peak = max(steps, key=lambda s: s["activation_peak_bytes"])
    metric = res["primary_metric"]
    line.update({"metric": metric, "value": res["final"][metric],
                 "examples_per_s": res.get("train_samples_per_second"),
                 "step_ms_median": statistics.median(s["step_ms"] for s in steps),
                 "activation_peak_bytes": peak["activation_peak_bytes"],
                 "peak_bytes_by_tag": peak.get("peak_bytes_by_tag"),
                 "kept_bytes_max": max(s.get("saved_bytes_max", 0) for s in steps)})
else:
    lines = [json.loads(l) for l in open(os.path.join(d, "twin.jsonl")) if l.startswith("{")]
    s = lines[-1]
    final = s.get("final", {})
    # leanback's primary metric per task: combined_score (MRPC, QQP, STS-B), matthews (CoLA), accuracy
    key = next((k for k in ("eval_combined_score", "eval_matthews_correlation", "eval_accuracy") if k in final), None)
    line.update({"metric": key, "value": final.get(key), "examples_per_s": s["examples_per_s"],
                 "max_rss_mb": s.get("max_rss_mb")})
    line.update({k: s[k] for k in ("params_mb", "grads_mb", "optimizer_mb", "kept_mb") if k in s})
print(json.dumps(line))
EOF
}

for seed in ${SEEDS:-1}; do
  for task in ${TASKS:-mrpc sst2 rte cola stsb}; do
    for row in ${ROWS:-full lora lora_all lora_hot lora_instant lora_budget}; do
      frameworks=" ${FRAMEWORKS:-leanback pytorch} "
      # Only leanback runs the rows without a twin (nothing to plan or configure otherwise).
      has_twin "$row" || [[ "$frameworks" == *" leanback "* ]] || continue
      base="runs/lora_study/$task/$row/seed$seed"
      mkdir -p "$base"
      cfg="$base/config.in.json"
      case "$row" in lora_hot|lora_instant|lora_budget) make_config "$task" lora "$cfg" ;; *) make_config "$task" "$row" "$cfg" ;; esac
      strategy=()  # the row's flags
      case "$row" in
        lora_hot) strategy=(--strategy hot) ;;
        lora_instant) strategy=(--strategy instant) ;;
        lora_budget)  # planned once per task, every seed under that plan
          plan="runs/lora_study/$task/$row/plan.json"
          if ! plan_once "$plan" "$base/lb.log" "$cfg" "${BUDGET:-115.2MB}"; then
            echo "lora_study.sh: planning $task $row failed; see $base/lb.log" >&2
            continue
          fi
          strategy=(--memory-plan "$plan") ;;
      esac
      if [[ "$frameworks" == *" leanback "* && ! -f "$base/lb/eval_results.json" ]]; then
        start=$(date +%s)
        if "${pin[@]}" "$lb" train "$cfg" --seed "$seed" "${strategy[@]}" --out "$base/lb" --overwrite --no-progress \
             > "$base/lb.log" 2>&1; then
          record "$base/lb" "$task" "$row" "$seed" leanback "$(( $(date +%s) - start ))"
          echo "lora_study.sh: leanback $task $row seed $seed done"
        else
          echo "lora_study.sh: leanback $task $row seed $seed failed; see $base/lb.log" >&2
        fi
      fi
      has_twin "$row" || continue
      [[ "${TWIN:-0}" = 1 && "$frameworks" == *" pytorch "* ]] || continue
      [ -f "$base/twin/twin.jsonl" ] && grep -q '"final"' "$base/twin/twin.jsonl" && continue
      mkdir -p "$base/twin"
      start=$(date +%s)
      if "${pin[@]}" "$py" tools/bench/glue_twin.py "$cfg" --seed "$seed" --threads "$threads" \
           > "$base/twin/twin.jsonl" 2> "$base/twin.log"; then
        record "$base/twin" "$task" "$row" "$seed" pytorch "$(( $(date +%s) - start ))"
        echo "lora_study.sh: pytorch $task $row seed $seed done"
      else
        echo "lora_study.sh: pytorch $task $row seed $seed failed; see $base/twin.log" >&2
      fi
    done
  done
done
