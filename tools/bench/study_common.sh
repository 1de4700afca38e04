# Shared by study.sh and study_cifar.sh (sourced): one comparison of the fidelity study.
#   study_compare NAME CONFIG DIR DEST [compare flags...]
# runs `$lb compare CONFIG ... --out DIR` (log appended to DIR.log, so two at once on one DIR
# with different strategies keep both; finished runs reused) and copies its
# report and plots (small) to DEST.
# Finished runs also outlive the machine: each one's records (eval_results.json, metrics.jsonl,
# config.json, plan.txt: what compare's report reads; no checkpoints) are copied to
# DEST/runs/STRATEGY/seed-N/, with compare.json, and put back into DIR when DIR is absent, so a
# study split over sessions on fresh machines (e.g. a CIFAR run per session, or seeds 2-3
# after seed 1) reuses what an earlier session trained instead of training it again.
# Kept records name the model directory as ${LEANBACK_HOME}/... (this machine's path means
# nothing elsewhere); restoring expands it again, since compare reuses runs only under the
# config it resolves here.
study_home() { echo "${LEANBACK_HOME:-$HOME/.cache/leanback}"; }
study_unexpand_home() {
  local home f
  home="$(study_home)"
  for f in "$@"; do sed -i "s|$home/|\${LEANBACK_HOME}/|g" "$f"; done
}

study_restore_runs() {
  local dir="$1" dest="$2" home
  if [ -e "$dir" ] || [ ! -f "$dest/runs/compare.json" ]; then return 0; fi
  mkdir -p "$dir"
  cp -r "$dest/runs/." "$dir/"
  home="$(study_home)"
  find "$dir" -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.txt' \) \
    -exec sed -i "s|\\\${LEANBACK_HOME}/|$home/|g" {} +
  echo "$(basename "$0"): restored the finished runs of $dest/runs into $dir"
}

study_keep_runs() {
  local dir="$1" dest="$2" run rel f
  mkdir -p "$dest/runs"
  cp "$dir/compare.json" "$dest/runs/"
  study_unexpand_home "$dest/runs/compare.json"
  for run in "$dir"/*/seed-*; do
    [ -f "$run/eval_results.json" ] || continue
    rel="${run#"$dir"/}"
    mkdir -p "$dest/runs/$rel"
    for f in eval_results.json metrics.jsonl config.json plan.txt; do
      if [ -f "$run/$f" ]; then cp "$run/$f" "$dest/runs/$rel/" && study_unexpand_home "$dest/runs/$rel/$f"; fi
    done
  done
}

study_compare() {
  local name="$1" config="$2" dir="$3" dest="$4"
  shift 4
  mkdir -p "$(dirname "$dir")"
  study_restore_runs "$dir" "$dest"
  if ! "$lb" compare "$config" "$@" --out "$dir" --no-progress >> "$dir.log" 2>&1; then
    echo "$(basename "$0"): $name failed; see $dir.log" >&2
    # The runs that did finish are kept all the same: a rerun reuses them.
    if [ -f "$dir/compare.json" ]; then study_keep_runs "$dir" "$dest"; fi
    return 0
  fi
  mkdir -p "$dest/plots"
  cp "$dir/report.json" "$dir/report.md" "$dest/"
  cp "$dir"/plots/*.png "$dest/plots/" 2>/dev/null || true
  study_keep_runs "$dir" "$dest"
  echo "$(basename "$0"): $name done"
}
