# Shared by study.sh and study_cifar.sh (sourced): one comparison of the fidelity study.
#   study_compare NAME CONFIG DIR DEST [compare flags...]
# runs `$lb compare CONFIG ... --out DIR` (log appended to DIR.log, so two at once on one DIR
# with different strategies keep both; finished runs in DIR are reused) and copies its
# report.json (compact) and report.md to DEST. Per-run records, plots and logs stay in DIR
# (runs/, outside the source tree); `leanback plot DIR` redraws the plots.
study_compare() {
  local name="$1" config="$2" dir="$3" dest="$4"
  shift 4
  mkdir -p "$(dirname "$dir")"
  if ! "$lb" compare "$config" "$@" --out "$dir" --no-progress >> "$dir.log" 2>&1; then
    # The runs that did finish stay in DIR: a rerun reuses them.
    echo "$(basename "$0"): $name failed; see $dir.log" >&2
    return 0
  fi
  mkdir -p "$dest"
  python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1])), open(sys.argv[2], "w"), separators=(",", ":"))' \
    "$dir/report.json" "$dest/report.json"
  # The plots stay in DIR: the kept report says where they are.
  sed '/^!\[[a-z_]*\](plots\/[a-z_]*\.png)$/d' "$dir/report.md" > "$dest/report.md"
  printf '\nNot kept in the repository: `tools/studies/fidelity/study.sh` (or `study_cifar.sh`) writes them into the\ncompare directory under `runs/study/`, and `leanback plot DIR` redraws them.\n' >> "$dest/report.md"
  echo "$(basename "$0"): $name done"
}
