#!/usr/bin/env bash
# LoRA training throughput, leanback against the PyTorch + PEFT twin, side by side: per round
# and task, STEPS optimizer steps (no evaluation) of the LoRA row's config
# (tools/bench/lora_config.py) under leanback's vanilla, HOT and INSTANT backward and of
# tools/bench/glue_twin.py on the same config, one after the other, so each ratio compares runs
# seconds apart. One JSON line per run appended to OUT: examples/s, the load average before and
# after, the CPU, thread count and checkout. The table: lora_table.py --speed (beside this
# script).
#   TASKS="mrpc rte cola sst2 stsb" ROWS="lora" ROUNDS=3 STEPS=40 THREADS=2 \
#     tools/studies/lora/lora_speed.sh [OUT]
# LB picks the leanback binary, PY the Python with torch, transformers and peft; CORE=C pins.
# Run it on an otherwise idle machine: the load average in each line says whether it was.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/lora/lora_speed.jsonl}"
lb="${LB:-build/leanback}"
py="${PY:-python3}"
threads="${THREADS:-2}"
THREADS="$threads"
steps="${STEPS:-40}"
source tools/bench/run_env.sh  # OMP_NUM_THREADS, pin, cpu, commit
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

record() {  # task row round framework strategy examples_per_s load_before
  python3 - "$@" "$(cut -d' ' -f1 /proc/loadavg)" "$cpu" "$threads" "$commit" "$steps" >> "$out" <<'PYEOF'
import json, sys
task, row, rnd, fw, strategy, eps, load0, load1, cpu, threads, commit, steps = sys.argv[1:13]
print(json.dumps({"task": task, "row": row, "round": int(rnd), "framework": fw, "strategy": strategy,
                  "examples_per_s": float(eps), "steps": int(steps), "load_before": float(load0),
                  "load_after": float(load1), "cpu": cpu, "threads": int(threads), "commit": commit}))
PYEOF
}

for r in $(seq 1 "${ROUNDS:-3}"); do
  for task in ${TASKS:-mrpc rte cola sst2 stsb}; do
    for row in ${ROWS:-lora}; do
      cfg="$tmp/$task-$row.json"
      python3 tools/bench/lora_config.py "$task" "$row" "$cfg"
      for strategy in ${STRATEGIES:-vanilla hot instant}; do
        load0="$(cut -d' ' -f1 /proc/loadavg)"
        if ! "${pin[@]}" "$lb" train "$cfg" --strategy "$strategy" --set train.max_steps="$steps" \
             --set train.eval_every=1000000 --set data.max_eval_examples=32 --set train.save_every=0 \
             --out "$tmp/lb" --overwrite --no-progress > "$tmp/lb.log" 2>&1; then
          echo "lora_speed.sh: leanback $task $row $strategy failed:" >&2
          tail -5 "$tmp/lb.log" >&2
          exit 1
        fi
        eps="$(python3 -c "import json; print(json.load(open('$tmp/lb/eval_results.json'))['train_samples_per_second'])")"
        record "$task" "$row" "$r" leanback "$strategy" "$eps" "$load0"
        echo "lora_speed.sh: round $r $task $row leanback $strategy $eps ex/s"
      done
      load0="$(cut -d' ' -f1 /proc/loadavg)"
      if ! "${pin[@]}" "$py" tools/bench/glue_twin.py "$cfg" --max-steps "$steps" --threads "$threads" \
           > "$tmp/twin.jsonl" 2> "$tmp/twin.log"; then
        echo "lora_speed.sh: pytorch $task $row failed:" >&2
        tail -5 "$tmp/twin.log" >&2
        exit 1
      fi
      eps="$(tail -1 "$tmp/twin.jsonl" | python3 -c "import json, sys; print(json.loads(sys.stdin.read())['examples_per_s'])")"
      record "$task" "$row" "$r" pytorch vanilla "$eps" "$load0"
      echo "lora_speed.sh: round $r $task $row pytorch $eps ex/s"
    done
  done
done
