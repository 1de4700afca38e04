# Shared by study.sh and study_cifar.sh (sourced): one comparison of the fidelity study.
#   study_compare NAME CONFIG DIR DEST [compare flags...]
# runs `$lb compare CONFIG ... --out DIR` (log in DIR.log; finished runs reused) and copies its
# report and plots (small) to DEST.
study_compare() {
  local name="$1" config="$2" dir="$3" dest="$4"
  shift 4
  mkdir -p "$(dirname "$dir")"
  "$lb" compare "$config" "$@" --out "$dir" --no-progress > "$dir.log" 2>&1 ||
    { echo "$(basename "$0"): $name failed; see $dir.log" >&2; return 0; }
  mkdir -p "$dest/plots"
  cp "$dir/report.json" "$dir/report.md" "$dest/"
  cp "$dir"/plots/*.png "$dest/plots/" 2>/dev/null || true
  echo "$(basename "$0"): $name done"
}
