#!/usr/bin/env bash
# Adam's moments in 32, 8 and 4 bits (optimizer.state_bits) on MiniLM GLUE fine-tuning: the
# dev metric, the step time and the process's max RSS of each run, one JSON line per run
# appended to OUT, each naming the CPU as lscpu does. Needs tools/fetch_pretrained.sh and
# ../shared/data. Runs are sequential and print their progress.
# Usage: tools/studies/optimizer_state/run.sh [OUT]
#   TASKS="mrpc rte" SEEDS="1 2 3" BITS="32 8 4" THREADS=2 LEANBACK=build/leanback
#   RUNS=DIR (run directories; default a temporary one, removed)
# Print the table: python3 tools/studies/optimizer_state/table.py OUT
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-$root/tools/studies/optimizer_state/results.jsonl}"
lb="${LEANBACK:-build/leanback}"
threads="${THREADS:-2}"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) family $(lscpu | sed -n 's/^CPU family: *//p' | head -1) model $(lscpu | sed -n 's/^Model: *//p' | head -1)"
commit="$(git rev-parse --short HEAD)"
runs="${RUNS:-$(mktemp -d)}"
[ -n "${RUNS:-}" ] || trap 'rm -rf "$runs"' EXIT
set -- ${TASKS:-mrpc rte}
tasks=("$@")
n=0
total=$(( ${#tasks[@]} * $(wc -w <<< "${SEEDS:-1 2 3}") * $(wc -w <<< "${BITS:-32 8 4}") ))
start=$SECONDS
for task in "${tasks[@]}"; do
  for seed in ${SEEDS:-1 2 3}; do
    for bits in ${BITS:-32 8 4}; do
      n=$((n + 1))
      echo "[$n/$total, $((SECONDS - start)) s] $task seed $seed, state_bits $bits" >&2
      dir="$runs/${task}_s${seed}_b${bits}"
      /usr/bin/time -v "$lb" train "configs/minilm_$task.json" --seed "$seed" --threads "$threads" \
        --set optimizer.state_bits="$bits" --out "$dir" --overwrite --no-progress > "$dir.log" 2>&1 ||
        { tail -5 "$dir.log" >&2; exit 1; }
      python3 - "$dir" "$dir.log" "$task" "$seed" "$bits" "$cpu" "$commit" "$threads" >> "$out" <<'PY'
import json, re, sys
d, log, task, seed, bits, cpu, commit, threads = sys.argv[1:]
r = json.load(open(d + "/eval_results.json"))
text = open(log).read()
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
final = {k: v for k, v in r["final"].items() if k.startswith("eval_") and "runtime" not in k and "per_second" not in k}
metric = r["primary_metric"] if r["primary_metric"].startswith("eval_") else "eval_" + r["primary_metric"]
print(json.dumps({"task": task, "seed": int(seed), "state_bits": int(bits), "cpu": cpu, "commit": commit,
                  "threads": int(threads), "max_rss_mb": round(rss / 1024, 1), "primary_metric": metric,
                  "best": r["best"].get(metric), "final": final,
                  "train_samples_per_second": r.get("train_samples_per_second")}))
PY
    done
  done
done
echo "done: $n runs in $((SECONDS - start)) s; table: python3 tools/studies/optimizer_state/table.py $out" >&2
