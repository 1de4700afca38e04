#!/usr/bin/env bash
# Builds leanback and runs the main job on its embedded default: trains the quickstart
# (a small BERT on the program's synthetic sentiment task; no download) into a fresh run
# directory $LEANBACK_HOME/runs/quickstart-<time> (~/.cache/leanback/runs: outside the
# repository), evaluating each epoch, and prints the final metrics; then
# compares the three backward strategies on it (`leanback compare`) and prints their table.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_BUILD_DIR:-$root/build}"
"$root/tools/build.sh" >/dev/null
cd "$root"
"$build/leanback" info
stamp="$(date +%Y%m%d-%H%M%S)"
runs="${LEANBACK_HOME:-$HOME/.cache/leanback}/runs"
"$build/leanback" train configs/quickstart.json --out "$runs/quickstart-$stamp"
"$build/leanback" compare configs/quickstart.json --strategies vanilla,instant,hot \
  --out "$runs/quickstart-$stamp-compare"
