#!/usr/bin/env bash
# The gradient probe (train.grad_probe_every) for every lossy setting of the memory grid
# (memory_grid.sh, beside this script): backward strategy x codec on every kept activation, on the
# pretrained MiniLM's first MRPC batch padded to 32 x 128, at step 0 (after calibration). Per
# setting the mean over Linear layers of the local g_w / g_x cosines (the strategy's own
# backward from the exact g_y; compressed layers only) and the end-to-end ones (the whole
# backward with the strategy and the codec, against the exact one), and the lowest end-to-end
# g_w cosine with its layer. vanilla's last row, "recompute in bf16", recomputes every
# encoder layer with bf16 products (memory.recompute_bf16) instead of a codec. Prints a
# Markdown table (NOTES.md here, "Kept bytes per op"). Needs the MiniLM
# (tools/fetch_pretrained.sh) and ../shared/data.
#   tools/studies/memory_budget/probe_grid.sh [LEANBACK] [CONFIG] [OUT_DIR]
set -euo pipefail
lb=${1:-build/leanback}
config=${2:-configs/minilm_mrpc.json}
out=${3:-runs/probe_grid}
echo "| strategy | codec on every kept activation | g_w cos local | g_x cos local | g_w cos end to end | g_x cos end to end | lowest g_w cos end to end |"
echo "|---|---|---:|---:|---:|---:|---|"
for s in vanilla instant hot; do
  for c in f32 bf16 int8 int4 "recompute in bf16"; do
    [ "$s" = vanilla ] && [ "$c" = f32 ] && continue  # exact: nothing to probe
    [ "$s" != vanilla ] && [ "$c" = "recompute in bf16" ] && continue
    dir="$out/$s-${c// /-}"
    args=(train "$config" --strategy "$s" --out "$dir" --overwrite --set train.max_steps=1 --set train.grad_probe_every=1
          --set data.padding=max_length --set model.skip_padding=false)
    case "$c" in
      f32) ;;
      "recompute in bf16") args+=(--set 'memory.recompute_bf16=["bert.encoder.layer.*"]') ;;
      *) args+=(--set "memory.codecs=[{\"codec\":\"$c\"}]") ;;
    esac
    "$lb" "${args[@]}" >"$out.log" 2>&1 || { echo "probe_grid.sh: $s/$c failed, see $out.log" >&2; exit 1; }
    python3 - "$dir/metrics.jsonl" "$s" "$c" <<'PY'
import json, statistics, sys
path, s, c = sys.argv[1:4]
layers = [l for line in open(path) if (m := json.loads(line))["type"] == "probe" for l in m["layers"]
          if l.get("probed", True)]
def mean(where, g):
    xs = [l[where][g]["cos"] for l in layers if g in l.get(where, {})]
    return f"{statistics.mean(xs):.4f}" if xs else "-"
low = min((l for l in layers if "g_w" in l.get("end_to_end", {})), key=lambda l: l["end_to_end"]["g_w"]["cos"])
print(f"| {s} | {c} | {mean('local', 'g_w')} | {mean('local', 'g_x')} | {mean('end_to_end', 'g_w')} | "
      f"{mean('end_to_end', 'g_x')} | {low['end_to_end']['g_w']['cos']:.4f} ({low['layer']}) |")
PY
  done
done
