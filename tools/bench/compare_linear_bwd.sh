#!/usr/bin/env bash
# Side-by-side linear_bwd: leanback vs PyTorch, interleaved for ROUNDS rounds (so background
# load hits both alike), one JSON line per run into OUT, then for each framework the best and
# the median of the per-run medians, and the per-round ratio leanback / PyTorch (runs of one
# round are back to back, so the ratio is the figure least disturbed by other load).
#
# Usage: tools/bench/compare_linear_bwd.sh [ROUNDS] [OUT]
#   LEANBACK=build/leanback  TORCH_PYTHONS="/usr/bin/python3 $VENV_TORCH/bin/python"
#   WAIT_IDLE=SECONDS: before each round, wait up to SECONDS for the CPUs to be >= 90% idle
#   over 3 s (on a shared machine, rounds then run in quiet spells).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
OUT=${2:-/tmp/linear_bwd_compare.jsonl}
LEANBACK=${LEANBACK:-build/leanback}
TORCH_PYTHONS=${TORCH_PYTHONS:-/usr/bin/python3}
WAIT_IDLE=${WAIT_IDLE:-0}

# Percent idle of all CPUs over 3 s, from /proc/stat.
idle_pct() {
  local a b
  a=($(head -1 /proc/stat)); sleep 3; b=($(head -1 /proc/stat))
  local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  echo $(( total > 0 ? 100 * idle / total : 0 ))
}
wait_idle() {
  local deadline=$(( SECONDS + WAIT_IDLE ))
  while (( SECONDS < deadline )); do
    (( $(idle_pct) >= 90 )) && return 0
  done
  echo "compare_linear_bwd: no idle spell within ${WAIT_IDLE}s, measuring anyway" >&2
}
: > "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  (( WAIT_IDLE > 0 )) && wait_idle
  "$LEANBACK" bench linear_bwd --iters 10 --warmup 3 --json >> "$OUT"
  for py in $TORCH_PYTHONS; do
    "$py" tools/bench/linear_bwd.py --iters 10 --warmup 3 --json 2>/dev/null >> "$OUT"
  done
done
python3 - "$OUT" <<'EOF'
import json, statistics, sys
runs = {}
rounds = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs.setdefault(r["framework"], []).append(r)
    if r["framework"] == "leanback":
        rounds.append({})
    rounds[-1][r["framework"]] = r["ms_per_step"]
for fw, rs in runs.items():
    ms = [r["ms_per_step"] for r in rs]
    best = min(rs, key=lambda r: r["ms_per_step"])
    print(f"{fw:28s} best {min(ms):7.1f} ms/step (fwd {best['forward_ms']:.1f}, bwd "
          f"{best['backward_ms']:.1f}, {best['gflops']:.0f} GFLOP/s)  median of runs "
          f"{statistics.median(ms):7.1f}  runs {len(ms)}  saved {best['saved_bytes']}")
for fw in runs:
    if fw == "leanback":
        continue
    ratios = sorted(r["leanback"] / r[fw] for r in rounds if fw in r)
    print(f"leanback / {fw}: per-round time ratio median {statistics.median(ratios):.3f} "
          f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f}; < 1 means leanback is faster)")
EOF
