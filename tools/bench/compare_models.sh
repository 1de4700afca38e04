#!/usr/bin/env bash
# Side-by-side training-step benchmark of the model workloads (bert_mini, vit_tiny, resnet18):
# leanback vs each PyTorch interpreter, interleaved run by run (leanback, then each PyTorch,
# per workload and round) so that background load hits all of them alike. Each run is one
# JSON line in OUT, tagged with the round and the 1-minute load average before and after.
# The summary gives per framework the median and spread of the per-run medians, and per
# round the time ratio leanback / PyTorch (runs of one round are back to back: the ratio is
# the figure least disturbed by other load), with the load seen during the rounds.
#
# Usage: tools/bench/compare_models.sh [ROUNDS] [OUT] [WORKLOADS]
#   ROUNDS default 3, OUT default /tmp/models_compare.jsonl,
#   WORKLOADS default "bert_mini vit_tiny resnet18"
# Environment: LEANBACK=build/leanback  ITERS=5  WARMUP=2
#   TORCH_PYTHONS="$VENV_GOLD/bin/python $VENV_TORCH/bin/python"
#   LB_BENCH_EXTRA_PATH: appended to the PyTorch scripts' sys.path (see train_step_common.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
OUT=${2:-/tmp/models_compare.jsonl}
WORKLOADS=${3:-bert_mini vit_tiny resnet18}
LEANBACK=${LEANBACK:-build/leanback}
ITERS=${ITERS:-5}
WARMUP=${WARMUP:-2}
TORCH_PYTHONS=${TORCH_PYTHONS:-/usr/bin/python3}
loadavg() { cut -d' ' -f1 /proc/loadavg; }
# Runs one benchmark command and appends its JSON line with round and load fields.
run() {
  local round=$1; shift
  local before after line
  before=$(loadavg)
  line=$("$@" 2>/dev/null | tail -n 1)
  after=$(loadavg)
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(round=int(sys.argv[2]), load_before=float(sys.argv[3]), load_after=float(sys.argv[4])); print(json.dumps(r))' \
    "$line" "$round" "$before" "$after" >> "$OUT"
}
: > "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for w in $WORKLOADS; do
    run "$r" "$LEANBACK" bench "$w" --iters "$ITERS" --warmup "$WARMUP" --json
    for py in $TORCH_PYTHONS; do
      run "$r" "$py" "tools/bench/$w.py" --iters "$ITERS" --warmup "$WARMUP" --json
    done
  done
done
python3 - "$OUT" <<'PYEOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
loads = [x for r in runs for x in (r["load_before"], r["load_after"])]
print(f"{len(runs)} runs; 1-min load average during the runs: min {min(loads):.1f}, "
      f"median {statistics.median(loads):.1f}, max {max(loads):.1f} (2 cores)")
for w in dict.fromkeys(r["workload"] for r in runs):
    rs = [r for r in runs if r["workload"] == w]
    print(f"\n{w}")
    fws = list(dict.fromkeys(r["framework"] for r in rs))
    for fw in fws:
        ms = sorted(r["ms_per_step"] for r in rs if r["framework"] == fw)
        best = min((r for r in rs if r["framework"] == fw), key=lambda r: r["ms_per_step"])
        spread = (ms[-1] - ms[0]) / statistics.median(ms) * 100
        print(f"  {fw:26s} median {statistics.median(ms):8.1f} ms/step  best {ms[0]:8.1f}  "
              f"worst {ms[-1]:8.1f}  (spread {spread:.0f}% of median; best run: fwd "
              f"{best['forward_ms']:.0f}, bwd {best['backward_ms']:.0f}, opt "
              f"{best['optimizer_ms']:.0f} ms; saved {best['saved_bytes'] / 2**20:.0f} MiB)")
    for fw in fws:
        if fw == "leanback":
            continue
        ratios = []
        for rnd in sorted({r["round"] for r in rs}):
            a = [r["ms_per_step"] for r in rs if r["round"] == rnd and r["framework"] == "leanback"]
            b = [r["ms_per_step"] for r in rs if r["round"] == rnd and r["framework"] == fw]
            if a and b:
                ratios.append(a[0] / b[0])
        ratios.sort()
        print(f"  leanback / {fw}: per-round ratio median {statistics.median(ratios):.3f} "
              f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f}; < 1: leanback faster, "
              f"i.e. {1 / statistics.median(ratios):.2f}x)")
PYEOF
