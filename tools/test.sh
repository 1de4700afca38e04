#!/usr/bin/env bash
# The test command (what CI runs):
#   tools/test.sh              build and run the whole suite with CTest, then the sanitizer
#                              part: the input-facing tests (label "input") under ASan + UBSan
#                              and each fuzz harness for a few seconds (clang build in
#                              build-sanitize/)
#   tools/test.sh --sanitize   the whole suite under ASan + UBSan (build-sanitize/, ~30 min
#                              to build on 2 cores)
#   tools/test.sh --no-sanitize  the plain suite only
# Extra arguments go to cmake for the plain build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_BUILD_DIR:-$root/build}"
san="${LB_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
mode=default
case "${1:-}" in
  --sanitize) mode=sanitize; shift ;;
  --no-sanitize) mode=plain; shift ;;
esac
# Leak checking on; every sanitizer report fails the test that produced it.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/tools/lsan.supp:${LSAN_OPTIONS:-}"  # third-party only
if [ "$mode" = sanitize ]; then
  "$root/tools/sanitize_build.sh" all
  cd "$san"
  ctest --output-on-failure -j"$(nproc)" --timeout 1800
  exit 0
fi
"$root/tools/build.sh" "$@"
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 600)
[ "$mode" = plain ] && exit 0
echo "== sanitizer part: input-facing tests under ASan + UBSan, fuzz smoke"
"$root/tools/sanitize_build.sh" fast
(cd "$san" && ctest --output-on-failure -j"$(nproc)" --timeout 1200 -L input)
"$root/tools/fuzz.sh" 5
