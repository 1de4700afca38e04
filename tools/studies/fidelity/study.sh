#!/usr/bin/env bash
# The fidelity study: `leanback compare` of vanilla / INSTANT / HOT per GLUE task with the
# pretrained MiniLM, in one of two settings; each task's compare directory is
# runs/study/SETTING/TASK (finished runs are reused, an interrupted one resumes, so the study
# runs in parts; runs/ is outside git), and its report.json and report.md are copied to
# tools/studies/fidelity/results/SETTING/TASK/; study_table.py (beside this script)
# summarises them.
#   SETTING=full TASKS="cola sst2 mrpc stsb rte wnli" SEEDS=3 tools/studies/fidelity/study.sh
# STRATEGIES (default vanilla,instant,hot) runs a subset first; a later full call reuses those
# runs and writes the three-strategy report.
# Settings:
#   full  full fine-tuning, every encoder Linear compressed (compare's override: all layers but
#         the embeddings, pooler and classifier)
#   last  the papers' setting: the embeddings and encoder layers 0-3 frozen, so the last 2 of
#         MiniLM's 6 encoder layers are fine-tuned and compressed (pooler and classifier exact)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
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
source "$root/tools/studies/fidelity/study_common.sh"
for task in ${TASKS:-cola sst2 mrpc stsb rte wnli}; do
  study_compare "$setting/$task" "configs/minilm_$task.json" "runs/study/$setting/$task" \
    "tools/studies/fidelity/results/$setting/$task" --strategies "$strategies" --seeds "$seeds" "${sets[@]}"
done
