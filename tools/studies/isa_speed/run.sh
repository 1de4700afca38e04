#!/usr/bin/env bash
# The strategies' speed per instruction set on this CPU (issue: fast on every CPU users have).
# Interleaved rounds, one JSON line per run appended to OUT, every line naming the CPU as
# lscpu does (model name, family, model):
#   linear_bwd  `leanback bench linear_bwd` backward per strategy (vanilla, HOT 8-bit, HOT
#               4-bit, INSTANT rank 8), for each LEANBACK_ISA level this CPU has
#   mrpc        examples/s of STEPS MiniLM MRPC fine-tuning steps per strategy (vanilla, HOT,
#               INSTANT); needs tools/fetch_pretrained.sh and ../shared/data
#   models      bench bert_mini / vit_tiny / resnet18 beside PyTorch (compare_models.sh)
# Usage: tools/studies/isa_speed/run.sh [ROUNDS] [OUT]
#   PARTS="linear_bwd mrpc models"  LEVELS="avx2 avx512 ..." (default: those the CPU has,
#   portable excluded: its int8 GEMM takes minutes a step)  STEPS=40  THREADS=2
#   TORCH_PYTHONS=... (models; see compare_models.sh)  LEANBACK=build/leanback
# Print the table: python3 tools/studies/isa_speed/table.py OUT
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
rounds="${1:-3}"
out="${2:-$root/tools/studies/isa_speed/results.jsonl}"
parts="${PARTS:-linear_bwd mrpc models}"
steps="${STEPS:-40}"
threads="${THREADS:-2}"
lb="${LEANBACK:-build/leanback}"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) family $(lscpu | sed -n 's/^CPU family: *//p' | head -1) model $(lscpu | sed -n 's/^Model: *//p' | head -1)"
if [ -z "${LEVELS:-}" ]; then
  LEVELS=""
  for isa in avx2 avx512 avx512-vnni amx; do
    LEANBACK_ISA=$isa "$lb" info 2>/dev/null | grep -q "kernels up to $isa" && LEVELS="$LEVELS $isa"
  done
fi
commit="$(git rev-parse --short HEAD)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
# record JSON [k=v ...]: the line with cpu, commit, round, load and the given fields added.
record() {
  local json="$1"; shift
  python3 - "$json" "$cpu" "$commit" "$(cut -d' ' -f1 /proc/loadavg)" "$@" >> "$out" <<'PY'
import json, sys
keep = ("workload", "framework", "strategy", "backward_ms", "forward_ms", "optimizer_ms", "ms_per_step",
        "calibration_ms", "examples_per_s", "saved_bytes")  # the bench line's fields the table reads
r = {k: v for k, v in (json.loads(sys.argv[1]) if sys.argv[1] else {}).items() if k in keep}
r.update(cpu=sys.argv[2], commit=sys.argv[3], load=float(sys.argv[4]))
for kv in sys.argv[5:]:
    k, v = kv.split("=", 1)
    r[k] = int(v) if v.isdigit() else v
print(json.dumps(r))
PY
}
for r in $(seq 1 "$rounds"); do
  if [[ " $parts " == *" linear_bwd "* ]]; then
    for isa in $LEVELS; do
      kernel="$(LEANBACK_ISA=$isa "$lb" info 2>/dev/null | sed -n 's/^int8 GEMM kernel: //p')"
      for s in "vanilla" "hot --gx-bits 8" "hot --gx-bits 4" "instant --rank 8"; do
        echo "[$((SECONDS - start)) s] round $r/$rounds linear_bwd $isa $s" >&2
        line="$(LEANBACK_ISA=$isa OMP_NUM_THREADS=$threads "$lb" bench linear_bwd --strategy $s --iters 5 --warmup 1 \
                 --json 2>/dev/null | tail -1)"
        record "$line" part=linear_bwd isa="$isa" int8_gemm="$kernel" setting="$s" round="$r" \
          omp_threads="$threads"
      done
    done
  fi
  if [[ " $parts " == *" mrpc "* ]]; then
    for s in vanilla hot instant; do
      echo "[$((SECONDS - start)) s] round $r/$rounds mrpc $s ($steps steps)" >&2
      OMP_NUM_THREADS=$threads "$lb" train configs/minilm_mrpc.json --strategy "$s" --set train.max_steps="$steps" \
        --set train.eval_every=1000000 --set data.max_eval_examples=32 --out "$tmp/run" --overwrite \
        --no-progress > /dev/null 2>&1
      eps="$(python3 -c "import json; print(json.load(open('$tmp/run/eval_results.json'))['train_samples_per_second'])")"
      record "{\"examples_per_s\": $eps}" part=mrpc isa="$(echo $LEVELS | awk '{print $NF}')" setting="$s" \
        round="$r" steps="$steps" omp_threads="$threads"
    done
  fi
  if [[ " $parts " == *" models "* ]]; then
    echo "[$((SECONDS - start)) s] round $r/$rounds models beside PyTorch" >&2
    tools/bench/compare_models.sh 1 "$tmp/models.jsonl" > /dev/null 2>&1
    while IFS= read -r line; do record "$line" part=models round="$r"; done < "$tmp/models.jsonl"
  fi
done
echo "[$((SECONDS - start)) s] done: $out" >&2
