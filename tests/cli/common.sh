# Sourced by the CLI test scripts: $lb (the binary), $configs, a temp dir $tmp removed at
# exit, and fail().
# Usage in a script: source "$(dirname "$0")/common.sh" "$@"
set -uo pipefail
lb="$1"
configs="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
