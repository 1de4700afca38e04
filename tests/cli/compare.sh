#!/usr/bin/env bash
# `leanback compare` on the quickstart (three strategies, one seed, a shortened run): the table
# on stdout, report.json / report.md, the plots (when a Python with matplotlib is there; the
# reason is printed otherwise), `leanback plot` redrawing them, a rerun reusing every run, and
# bad flags exiting 2.
# Usage: compare.sh LEANBACK_BINARY CONFIG_DIR
source "$(dirname "$0")/common.sh" "$@"
small=(--set train.epochs=1 --set data.synthetic_train=640 --set data.synthetic_eval=200 --no-progress)

"$lb" compare "$configs/quickstart.json" "${small[@]}" --out "$tmp/cmp" > "$tmp/out" 2> "$tmp/err" \
  || { tail -20 "$tmp/err"; fail "compare exited $?"; }
for s in vanilla instant hot; do
  grep -qE "^$s +1 +[0-9.]+ ± " "$tmp/out" || { cat "$tmp/out"; fail "no table row for $s"; }
  [ -f "$tmp/cmp/$s/seed-42/eval_results.json" ] || fail "no run directory for $s"
done
python3 - "$tmp/cmp/report.json" <<'PY' || fail "report.json is not as expected"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["primary_metric"] == "eval_accuracy" and r["baseline"] == "vanilla", r
assert [s["strategy"] for s in r["strategies"]] == ["vanilla", "instant", "hot"]
for s in r["strategies"]:
    assert len(s["runs"]) == 1 and s["saved_bytes_mean"]["mean"] > 0, s["strategy"]
PY
grep -q "^| instant |" "$tmp/cmp/report.md" || fail "report.md has no table"
if grep -q "warning: no plots" "$tmp/err"; then
  echo "note: plots not drawn here: $(grep 'no plots' "$tmp/err")"
else
  for p in loss eval bars layers; do [ -s "$tmp/cmp/plots/$p.png" ] || fail "no plots/$p.png"; done
  grep -q "(plots/bars.png)" "$tmp/cmp/report.md" || fail "report.md does not show the plots"
  rm "$tmp/cmp/plots/bars.png"
  "$lb" plot "$tmp/cmp" > "$tmp/plot.out" 2>&1 || { cat "$tmp/plot.out"; fail "plot exited $?"; }
  [ -s "$tmp/cmp/plots/bars.png" ] || fail "leanback plot did not redraw bars.png"
  "$lb" plot "$tmp/cmp/hot/seed-42" > /dev/null 2>&1 || fail "plot of a run directory failed"
  [ -s "$tmp/cmp/hot/seed-42/plots/loss.png" ] || fail "no loss plot for a run directory"
fi

# a rerun reuses every finished run
"$lb" compare "$configs/quickstart.json" "${small[@]}" --out "$tmp/cmp" --no-plots > /dev/null 2> "$tmp/err2" \
  || fail "rerun exited $?"
[ "$(grep -c 'done, reusing' "$tmp/err2")" -eq 3 ] || { cat "$tmp/err2"; fail "rerun did not reuse the 3 runs"; }

# bad input
"$lb" compare "$configs/quickstart.json" --strategies vanilla,fast 2> "$tmp/bad"
[ $? -eq 2 ] || fail "unknown strategy did not exit 2"
grep -q "'fast' is not a strategy" "$tmp/bad" || fail "no message for an unknown strategy"
"$lb" compare "$configs/quickstart.json" --seeds 0 2> /dev/null
[ $? -eq 2 ] || fail "--seeds 0 did not exit 2"
"$lb" plot "$tmp" 2> "$tmp/bad"
[ $? -eq 1 ] || fail "plot of a non-run directory did not exit 1"
grep -q "neither a compare directory" "$tmp/bad" || fail "no message for plot of a non-run directory"
echo ok
