#!/usr/bin/env bash
# Training throughput of a GLUE recipe, leanback vs its PyTorch twin, interleaved rounds:
# each round runs STEPS optimizer steps of `leanback train CONFIG` (no evaluation) and of
# tools/bench/glue_twin.py on the same config, and prints both examples/s and their ratio.
#   tools/bench/compare_glue_throughput.sh [ROUNDS] [CONFIG]     (STEPS=60, PYTHON=...)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
rounds="${1:-3}"
config="${2:-configs/minilm_mrpc.json}"
steps="${STEPS:-60}"
python="${PYTHON:-python3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $steps steps per run; $config"
for r in $(seq 1 "$rounds"); do
  load0="$(cut -d' ' -f1 /proc/loadavg)"
  build/leanback train "$config" --set train.max_steps="$steps" --set train.eval_every=1000000 \
    --set data.max_eval_examples=32 --out "$out/lb" --overwrite --no-progress > /dev/null 2>&1
  lb="$(python3 -c "import json; print(json.load(open('$out/lb/eval_results.json'))['train_samples_per_second'])")"
  pt="$("$python" tools/bench/glue_twin.py "$config" --max-steps "$steps" 2>/dev/null | tail -1 |
        python3 -c "import json,sys; print(json.loads(sys.stdin.read())['examples_per_s'])")"
  python3 -c "print(f'round $r: leanback {$lb:.1f} ex/s, pytorch {$pt:.1f} ex/s, ratio {$lb/$pt:.2f} (load $load0 -> $(cut -d' ' -f1 /proc/loadavg))')"
done
