#!/usr/bin/env bash
# Kept bytes and activation peak of one full-batch MiniLM training step (the first MRPC batch
# padded to 32 x 128, f32) for every backward strategy x kept-tensor codec x recomputation,
# from `leanback plan --memory --json`; prints a Markdown table (NOTES.md here, "Kept bytes
# per op"). Needs the MiniLM (tools/fetch_pretrained.sh) and ../shared/data.
#   tools/studies/memory_budget/memory_grid.sh [LEANBACK] [CONFIG]
set -euo pipefail
lb=${1:-build/leanback}
config=${2:-configs/minilm_mrpc.json}
pytorch_mb=1152  # PyTorch 2.15 + transformers on the same batch (tools/bench/minilm_step_torch.py)
echo "| strategy | codec on every kept activation | every encoder layer recomputed | kept for backward | activation peak | vs PyTorch's ${pytorch_mb} MB kept |"
echo "|---|---|---|---:|---:|---:|"
for s in vanilla instant hot; do
  for c in f32 bf16 int8 int4; do
    for r in no yes; do
      args=(plan "$config" --memory --json --strategy "$s" --set data.padding=max_length --set model.skip_padding=false)
      [ "$c" != f32 ] && args+=(--set "memory.codecs=[{\"codec\":\"$c\"}]")
      [ "$r" = yes ] && args+=(--set 'memory.recompute=["bert.encoder.layer.*"]')
      "$lb" "${args[@]}" | python3 -c '
import json, sys
m = json.load(sys.stdin)
s, c, r, ref = sys.argv[1:5]
kept, peak = m["saved_bytes"] / 1e6, m["activation_peak_bytes"] / 1e6
print(f"| {s} | {c} | {r} | {kept:.1f} MB | {peak:.1f} MB | {float(ref) / kept:.1f}x less |")' "$s" "$c" "$r" "$pytorch_mb"
    done
  done
done
