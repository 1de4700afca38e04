#!/usr/bin/env bash
# Builds leanback and runs the main job on its embedded default: the Linear 768->3072
# forward+backward benchmark (x of shape (32, 128, 768)) under each backward strategy,
# side by side — backward time, bytes kept for backward, paper FLOPs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_BUILD_DIR:-$root/build}"
"$root/tools/build.sh" >/dev/null
"$build/leanback" info
for strategy in vanilla "instant --rank 8" hot; do
  # shellcheck disable=SC2086  # the strategy carries its own flags
  "$build/leanback" bench linear_bwd --strategy $strategy --iters 10
done
