#!/usr/bin/env bash
# Runs each libFuzzer harness in tests/fuzz for SECONDS (default 10) under ASan + UBSan:
#   tools/fuzz.sh [SECONDS] [HARNESS...]        e.g. tools/fuzz.sh 600 fuzz_safetensors
# Builds the sanitizer + fuzz build in build-sanitize/ ($LB_SANITIZE_BUILD_DIR) with clang if
# needed. Each harness starts from its seed corpus (tests/fuzz/corpus/<name> plus seeds made
# from the repo's own fixtures and configs) and keeps what it finds in
# build-sanitize/fuzz-corpus/<name>; crashes go to build-sanitize/fuzz-artifacts/. Prints one
# line per harness (executions, new corpus entries, findings); exits non-zero on any finding.
# FUZZ_JOBS=N runs N harnesses at once (default: the number of cores).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
secs="${1:-10}"
shift || true
"$root/tools/sanitize_build.sh" fuzz >/dev/null
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  for f in "$root"/tests/fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$f" .cpp)"); done
fi
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tools/lsan.supp:${LSAN_OPTIONS:-}"
seeds="$build/fuzz-seeds"
mkdir -p "$build/fuzz-artifacts" "$seeds"

# Seeds from the repository's own files (nothing downloaded, nothing committed twice).
make_seeds() {
  local h="$1" d="$seeds/$1"
  rm -rf "$d" && mkdir -p "$d"
  case "$h" in
    fuzz_safetensors) ls -S "$root"/tests/fixtures/*.safetensors | tail -6 | xargs -I{} cp {} "$d/" ;;
    fuzz_hf_config)
      for c in "$root"/tests/fixtures/*/config.json; do cp "$c" "$d/$(basename "$(dirname "$c")").json"; done ;;
    fuzz_config) cp "$root"/configs/*.json "$d/" ;;
    fuzz_checkpoint) LB_FUZZ_WRITE_SEED="$d/checkpoint" "$build/tests/fuzz/$h" ;;
  esac
}

run_one() {
  local h="$1" work="$build/fuzz-corpus/$1" log="$build/fuzz-$1.log"
  mkdir -p "$work"
  make_seeds "$h"
  local dirs=("$work" "$seeds/$h")
  [ -d "$root/tests/fuzz/corpus/${h#fuzz_}" ] && dirs+=("$root/tests/fuzz/corpus/${h#fuzz_}")
  local before
  before=$(find "$work" -type f | wc -l)
  local rc=0
  "$build/tests/fuzz/$h" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$h-" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  local after
  after=$(find "$work" -type f | wc -l)
  local found
  found=$(find "$build/fuzz-artifacts" -name "$h-*" -type f | wc -l)
  printf '%-18s %6ss  %10s execs  corpus +%d  findings %d%s\n' "$h" "$secs" "$execs" \
    $((after - before)) "$found" "$([ "$rc" = 0 ] || echo "  (exit $rc; see $log)")"
  [ "$rc" = 0 ] && [ "$found" = 0 ]
}
export -f run_one make_seeds
export build seeds root secs
printf '%s\n' "${harnesses[@]}" | xargs -P "${FUZZ_JOBS:-$(nproc)}" -I{} bash -c 'run_one {}'
