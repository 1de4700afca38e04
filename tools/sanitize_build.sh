#!/usr/bin/env bash
# Configures and builds the sanitizer build in build-sanitize/ ($LB_SANITIZE_BUILD_DIR): clang
# (libFuzzer needs it), ASan + UBSan with float-cast-overflow, -O1, CUDA off.
#   tools/sanitize_build.sh all    everything (the whole suite under sanitizers)
#   tools/sanitize_build.sh fast   the CLI, the input-facing tests (CTest label "input") and
#                                  the fuzz harnesses
#   tools/sanitize_build.sh fuzz   the fuzz harnesses only
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
what="${1:-all}"
"$root/tools/setup.sh"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DLEANBACK_CUDA=OFF -DLEANBACK_SANITIZE=ON -DLEANBACK_FUZZ=ON >/dev/null
fuzz_targets=()
for f in "$root"/tests/fuzz/fuzz_*.cpp; do fuzz_targets+=("$(basename "$f" .cpp)"); done
case "$what" in
  all) cmake --build "$build" -j"$(nproc)" ;;
  fast)
    # The executables whose tests carry the "input" label (tests/CMakeLists.txt).
    mapfile -t fast < <(sed -n 's/^set(LB_INPUT_TESTS \(.*\))$/\1/p' "$root/tests/CMakeLists.txt" | tr ' ' '\n')
    cmake --build "$build" -j"$(nproc)" --target leanback "${fast[@]}" "${fuzz_targets[@]}" ;;
  fuzz) cmake --build "$build" -j"$(nproc)" --target "${fuzz_targets[@]}" ;;
  *) echo "usage: tools/sanitize_build.sh all|fast|fuzz" >&2; exit 2 ;;
esac
