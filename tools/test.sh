#!/usr/bin/env bash
# Set-up, configure, build and run the whole test suite with CTest (what CI runs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_BUILD_DIR:-$root/build}"
"$root/tools/build.sh" "$@"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600
