#!/usr/bin/env bash
# Every call points down the layers: no archive needs a symbol that only a layer above it
# defines. The include check (tools/check_layers.sh) cannot see a call through a declaration
# that lives low (a Tensor method defined in ops, say), and a static link may resolve an
# upward call anyway when the upper archive is on the line, so this reads the archives:
# each layer's undefined symbols must be defined in that layer, a layer below it, or outside
# leanback (the C++ runtime, BLAS, CUDA ...). It names the symbol, the archive member that
# needs it and the layer that defines it.
#   tools/check_links.sh core:ARCHIVE backend:ARCHIVE ...   (bottom first; CTest:
#   Layers.LinksPointDown passes the built archives)
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 LAYER:ARCHIVE ... (bottom layer first)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf -- "$tmp"' EXIT
# The layers each layer may call besides its own (CMakeLists.txt, lb_layer DEPENDS).
declare -A allowed=(
  [core]="core"
  [backend]="backend core"
  [autograd]="autograd backend core"
  [ops]="ops autograd backend core"
  [io]="io ops autograd backend core"
  [dist]="dist ops autograd backend core"
  [data]="data io ops autograd backend core"
  [nn]="nn dist ops autograd backend core"
  [optim]="optim io ops autograd backend core"
  [models]="models nn dist io ops autograd backend core"
  [train]="train models optim data nn dist io ops autograd backend core"
)
layers=()
for spec in "$@"; do
  layer="${spec%%:*}" archive="${spec#*:}"
  [ -n "${allowed[$layer]+x}" ] || { echo "error: unknown layer '$layer'" >&2; exit 2; }
  [ -f "$archive" ] || { echo "error: $archive (layer $layer) not found; build first" >&2; exit 2; }
  layers+=("$layer")
  # Defined (text, data, weak, ...) and undefined symbols, mangled (exact), per archive.
  nm --defined-only "$archive" 2>/dev/null | awk 'NF >= 3 {print $3}' | sort -u > "$tmp/$layer.def"
  nm -A --undefined-only "$archive" 2>/dev/null |
    awk '{member=$1; sub(/:$/, "", member); sub(/.*\[/, "", member); sub(/\].*/, "", member); print $NF "\t" member}' |
    sort -u > "$tmp/$layer.undef"
done
bad=0
for layer in "${layers[@]}"; do
  : > "$tmp/ok"
  for low in ${allowed[$layer]}; do [ -f "$tmp/$low.def" ] && cat "$tmp/$low.def" >> "$tmp/ok"; done
  sort -u -o "$tmp/ok" "$tmp/ok"
  for up in "${layers[@]}"; do
    case " ${allowed[$layer]} " in *" $up "*) continue ;; esac
    # Symbols `layer` needs, that it and the layers below do not define, and `up` does.
    awk -F'\t' 'NR == FNR {ok[$1] = 1; next} FILENAME == ARGV[2] {up[$1] = 1; next} ($1 in up) && !($1 in ok)' \
      "$tmp/ok" "$tmp/$up.def" "$tmp/$layer.undef" > "$tmp/hits" || true
    while IFS=$'\t' read -r sym member; do
      printf '%s (layer %s) calls %s, defined in layer %s\n' "$member" "$layer" \
        "$(printf '%s' "$sym" | c++filt)" "$up"
      bad=1
    done < "$tmp/hits"
  done
done
if [ "$bad" = 0 ]; then
  echo "links ok (${layers[*]})"
else
  echo "error: a layer calls a layer above it (see above); move the function down or the caller up" >&2
  exit 1
fi
