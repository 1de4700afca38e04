#!/usr/bin/env bash
# Does a LoRA run's outcome follow whose start it had? Per seed, leanback trains the LoRA
# study's recipe (tools/bench/lora_config.py's with_lora: r 8, alpha 16, lr 5e-4 on the named
# Linear layers) twice with every dropout off, so each run is a deterministic function of its
# start: once from PEFT's start for the seed (the twin's initial adapter and classifier,
# glue_twin.py --save-init) and once from its own (the config's lora section, --seed). Same
# data order, same code: only the initial lora_A and head differ. One JSON line per run
# appended to OUT (start, seed, final dev metrics).
#   TASK=rte LORA="query value" SEEDS="4 5 6" tools/studies/lora/lora_starts.sh [OUT]
# THREADS=N and CORE=C pin both (tools/bench/run_env.sh); LB the leanback binary, PYTHON a
# Python with torch, transformers and peft. Needs tools/fetch_pretrained.sh done and
# ../shared/data/glue. Runs go to runs/lora_starts/TASK/seedS/{pytorch,leanback} (outside
# git); a finished one is skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-tools/studies/lora/lora_starts.jsonl}"
python="${PYTHON:-python3}"
lb="${LB:-build/leanback}"
task="${TASK:-rte}"
lora="${LORA:-query value}"
cfg="configs/minilm_${task}.json"
[ -f "$cfg" ] || { echo "lora_starts: no $cfg" >&2; exit 2; }
source tools/bench/run_env.sh  # THREADS, CORE: pin; cpu; commit

for seed in ${SEEDS:-1}; do
  base="runs/lora_starts/$task/seed$seed"
  mkdir -p "$base"
  # The recipe without dropout; leanback from PEFT's start reads the adapter's own config.
  python3 - "$cfg" "$base" "$lora" <<'PY'
import json, os, sys
sys.path.insert(0, "tools/bench")
from lora_config import with_lora
src, base, lora = sys.argv[1:]
c = json.load(open(src))
with_lora(c, lora.split(), dropout=0.0)
c["model"].update({"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
c.pop("output", None)
json.dump(c, open(os.path.join(base, "leanback.json"), "w"), indent=1)
json.dump(c, open(os.path.join(base, "twin.json"), "w"), indent=1)
c["model"]["pretrained"] = os.path.abspath(os.path.join(base, "peft_start"))
del c["lora"]
json.dump(c, open(os.path.join(base, "pytorch.json"), "w"), indent=1)
PY
  if [ ! -f "$base/peft_start/adapter_config.json" ]; then
    "${pin[@]}" "$python" tools/bench/glue_twin.py "$base/twin.json" --seed "$seed" --threads "${THREADS:-2}" \
      --order leanback --save-init "$base/peft_start" --max-steps 1 > "$base/twin.jsonl" 2> "$base/twin.log"
  fi
  for start in pytorch leanback; do
    run="$base/$start"
    [ -f "$run/eval_results.json" ] && continue
    begin=$(date +%s)
    "${pin[@]}" "$lb" train "$base/$start.json" --seed "$seed" --out "$run" --overwrite --no-progress > "$run.log" 2>&1 \
      || { echo "lora_starts: $task seed $seed from $start's start failed; see $run.log" >&2; exit 1; }
    python3 - "$run/eval_results.json" "$task" "$lora" "$seed" "$start" "$(( $(date +%s) - begin ))" "$cpu" "$commit" >> "$out" <<'PY'
import json, sys
path, task, lora, seed, start, wall, cpu, commit = sys.argv[1:]
res = json.load(open(path))
final = {k: v for k, v in res["final"].items() if k.startswith("eval_") and k != "eval_loss"
         and not k.startswith("eval_runtime") and not k.startswith("eval_samples")}
print(json.dumps({"task": task, "lora": lora, "seed": int(seed), "start": start, "dropout": False,
                  "metric": res["primary_metric"], "value": res["final"][res["primary_metric"]], "final": final,
                  "wall_s": int(wall), "cpu": cpu, "commit": commit}))
PY
    echo "lora_starts: $task seed $seed from $start's start: $(tail -n 1 "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(100*r["value"],2))')"
  done
done
