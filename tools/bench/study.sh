#!/usr/bin/env bash
# The fidelity study: `leanback compare` of vanilla / INSTANT / HOT per GLUE task with the
# pretrained MiniLM, in one of two settings; each task's compare directory is
# runs/study/SETTING/TASK (finished runs are reused, an interrupted one resumes, so the study
# runs in parts), and its report.json, report.md and plots are copied (small) to
# tools/bench/results/study/SETTING/TASK/. tools/bench/study_table.py summarises them.
#   SETTING=full TASKS="cola sst2 mrpc stsb rte wnli" SEEDS=3 tools/bench/study.sh
# STRATEGIES (default vanilla,instant,hot) runs a subset first; a later full call reuses those
# runs and writes the three-strategy report.
# Settings:
#   full  full fine-tuning, every encoder Linear compressed (compare's override: all layers but
#         the embeddings, pooler and classifier)
#   last  the papers' setting: the embeddings and encoder layers 0-3 frozen, so the last 2 of
#         MiniLM's 6 encoder layers are fine-tuned and compressed (pooler and classifier exact)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
lb="${LB:-build/leanback}"
setting="${SETTING:-full}"
seeds="${SEEDS:-1}"
strategies="${STRATEGIES:-vanilla,instant,hot}"
sets=()
case "$setting" in
  full) ;;
  last) sets=(--set 'freeze=["bert.embeddings.*","bert.encoder.layer.0.*","bert.encoder.layer.1.*","bert.encoder.layer.2.*","bert.encoder.layer.3.*"]') ;;
  *) echo "study.sh: SETTING must be full or last, got '$setting'" >&2; exit 2 ;;
esac
for task in ${TASKS:-cola sst2 mrpc stsb rte wnli}; do
  dir="runs/study/$setting/$task"
  mkdir -p "$(dirname "$dir")"
  "$lb" compare "configs/minilm_$task.json" --strategies "$strategies" --seeds "$seeds" "${sets[@]}" \
    --out "$dir" --no-progress > "$dir.log" 2>&1 || { echo "study.sh: $task failed; see $dir.log" >&2; continue; }
  dest="tools/bench/results/study/$setting/$task"
  mkdir -p "$dest/plots"
  cp "$dir/report.json" "$dir/report.md" "$dest/"
  cp "$dir"/plots/*.png "$dest/plots/" 2>/dev/null || true
  echo "study.sh: $setting/$task done"
done
