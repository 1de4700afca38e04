#!/usr/bin/env bash
# Builds leanback and runs the main job on its embedded default.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_BUILD_DIR:-$root/build}"
"$root/tools/build.sh" >/dev/null
"$build/leanback" info
"$build/leanback" bench linear_bwd --json
