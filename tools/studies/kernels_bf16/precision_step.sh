#!/usr/bin/env bash
# bf16 against f32 training steps of one leanback binary (issue "CPU low precision": on Zen 5
# the bf16 bert_mini step should take <= 0.7x the f32 one). Runs alternate f32, bf16 within
# each round, so background load hits both alike; the per-round ratio bf16 / f32 is the
# figure to quote (single runs on these shared 2-vCPU machines move by 10-20%).
#
# Usage: tools/studies/kernels_bf16/precision_step.sh [ROUNDS] [OUT] [WORKLOADS]
#   ROUNDS default 6, OUT default /tmp/precision_step.jsonl, WORKLOADS default "bert_mini"
# Environment: LEANBACK=build/leanback  ITERS=8  WARMUP=2  STRATEGY=vanilla
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${1:-6}
OUT=${2:-/tmp/precision_step.jsonl}
WORKLOADS=${3:-bert_mini}
LEANBACK=${LEANBACK:-build/leanback}
ITERS=${ITERS:-8}
WARMUP=${WARMUP:-2}
STRATEGY=${STRATEGY:-vanilla}
: > "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for w in $WORKLOADS; do
    for p in f32 bf16; do
      line=$("$LEANBACK" bench "$w" --precision "$p" --strategy "$STRATEGY" --iters "$ITERS" \
             --warmup "$WARMUP" --json 2>/dev/null | tail -n 1)
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["round"]=int(sys.argv[2]); print(json.dumps(r))' \
        "$line" "$r" >> "$OUT"
    done
  done
done
python3 - "$OUT" <<'PYEOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
cpu = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
print(f"CPU: {cpu}; {len(runs)} runs")
for w in dict.fromkeys(r["workload"] for r in runs):
    rs = [r for r in runs if r["workload"] == w]
    kernel = next((r["threads"].get("bf16_gemm") for r in rs if r["precision"] == "bf16"), None)
    print(f"\n{w} (bf16 products on: {kernel or 'rounded copies through the f32 kernel'})")
    for p in ("f32", "bf16"):
        ms = sorted(r["ms_per_step"] for r in rs if r["precision"] == p)
        saved = next(r["saved_bytes"] for r in rs if r["precision"] == p)
        print(f"  {p:5s} median {statistics.median(ms):7.1f} ms/step (best {ms[0]:.1f}, worst "
              f"{ms[-1]:.1f}); saved for backward {saved / 2**20:.1f} MiB")
    by_round = {}
    for r in rs:
        by_round.setdefault(r["round"], {})[r["precision"]] = r["ms_per_step"]
    ratios = [v["bf16"] / v["f32"] for v in by_round.values() if "f32" in v and "bf16" in v]
    print("  bf16 / f32 per round: " + " ".join(f"{x:.2f}" for x in ratios) +
          f"; median {statistics.median(ratios):.2f}")
PYEOF
