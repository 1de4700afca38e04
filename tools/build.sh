#!/usr/bin/env bash
# Configures and builds leanback into build/ (or $LB_BUILD_DIR). Extra args go to cmake.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_BUILD_DIR:-$root/build}"
"$root/tools/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
