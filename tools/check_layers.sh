#!/usr/bin/env bash
# Every #include points down the layers (CMakeLists.txt: one static target per layer, linked
# downward only; docs/design.md "Layers"). All the headers sit under one include root, so the
# compiler alone would accept an upward include; this check fails on one and names the file,
# the line and the layers the file may include. Also the backend boundary: nn, train and
# models reach kernels only through the backend tables, so no file there includes a src/cpu/
# or cuda/ header, <cblas.h> or <lapacke.h>. And the training layer's rooms (src/train/<room>/,
# lb/train/<room>/; its top level holds the config, task, step and trainer): run/ (run
# directories, checkpoints, resume, logs) includes no other room; memory/ (budgets, the
# planner, accounting) and export/ (Hugging Face, PEFT) include run/ only; report/ (metrics,
# compare, plots, probes) includes any. A directory that is no known room is an error.
#   tools/check_layers.sh [SOURCE_DIR]      (CTest: Layers.IncludesPointDown)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"
# The layer of a file, or of an include path ("lb/nn/module.h", "src/cpu/gemm.h"): the CMake
# target that compiles it (CMakeLists.txt). cuda/'s runtime and allocator are core; its
# kernels are backend.
# The layers each layer may include (besides its own).
awk_prog='
function layer(p) {
  sub(/^include\//, "", p)
  if (p ~ /^(src|lb)\/core\// || p ~ /^cuda\/(runtime|caching_allocator|cuda_runtime_info)\./) return "core"
  if (p ~ /^(src\/backend|src\/cpu|cuda)\//) return "backend"
  if (p ~ /^(src|lb)\/autograd\//) return "autograd"
  if (p ~ /^(src|lb)\/ops\// || p == "lb/ops.h") return "ops"
  if (p ~ /^(src|lb)\/io\//) return "io"
  if (p ~ /^(src|lb)\/dist\//) return "dist"
  if (p ~ /^(src|lb)\/data\//) return "data"
  if (p ~ /^(src|lb)\/nn\//) return "nn"
  if (p ~ /^(src|lb)\/optim\//) return "optim"
  if (p ~ /^models\//) return "models"
  if (p ~ /^(src|lb)\/train\//) return "train"
  if (p ~ /^src\/cli\//) return "cli"
  return ""
}
# The room of a train file or include path: "top" for the top level of the training layer.
function room(p) {
  sub(/^include\//, "", p)
  sub(/^(src|lb)\/train\//, "", p)
  if (p !~ /\//) return "top"
  sub(/\/.*/, "", p)
  return p
}
BEGIN {
  rooms_allowed["top"] = " top run memory export report "
  rooms_allowed["run"] = " top run "
  rooms_allowed["memory"] = " top memory run "
  rooms_allowed["export"] = " top export run "
  rooms_allowed["report"] = " top report run memory export "
  low = " ops autograd backend core "
  allowed["core"] = " core "
  allowed["backend"] = " backend core "
  allowed["autograd"] = " autograd backend core "
  allowed["ops"] = low
  allowed["io"] = " io" low
  allowed["dist"] = " dist" low
  allowed["data"] = " data io" low
  allowed["nn"] = " nn dist" low
  allowed["optim"] = " optim io" low
  allowed["models"] = " models nn dist io" low
  allowed["train"] = " train models optim data nn dist io" low
  allowed["cli"] = " cli train models optim data nn dist io" low
  bad = 0
}
{
  # input: FILE:LINE:TEXT
  file = $0; sub(/:.*/, "", file)
  rest = substr($0, length(file) + 2); line = rest; sub(/:.*/, "", line)
  text = substr(rest, length(line) + 2)
  if (!match(text, /#[ \t]*include[ \t]*[<"][^">]+[">]/)) next
  inc = substr(text, RSTART, RLENGTH); sub(/^#[ \t]*include[ \t]*[<"]/, "", inc); sub(/[">]$/, "", inc)
  from = layer(file); if (from == "") next
  if (from ~ /^(nn|train|models)$/ && (inc ~ /^(src\/cpu|cuda)\// || inc ~ /^(cblas|lapacke)\.h$/)) {
    printf "%s:%s: %s includes %s: %s reaches kernels only through the backend tables (src/backend/)\n", file, line, from, inc, from
    bad = 1; next
  }
  to = layer(inc); if (to == "") next
  if (from == "train" && !(room(file) in rooms_allowed)) {
    printf "%s: src/train/%s/ is not a room of the training layer (tools/check_layers.sh lists them)\n", file, room(file)
    bad = 1; next
  }
  if (from == "train" && to == "train" && index(rooms_allowed[room(file)], " " room(inc) " ") == 0) {
    printf "%s:%s: train room %s includes %s (room %s); %s may include only:%s\n", file, line, room(file), inc,
           room(inc), room(file), rooms_allowed[room(file)]
    bad = 1; next
  }
  if (index(allowed[from], " " to " ") == 0) {
    printf "%s:%s: layer %s includes %s (layer %s); %s may include only:%s\n", file, line, from, inc, to, from, allowed[from]
    bad = 1
  }
}
END { exit bad }
'
if find src include models cuda -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 |
   xargs -0 grep -nE '^[[:space:]]*#[[:space:]]*include' | awk "$awk_prog"; then
  echo "layers ok"
else
  echo "error: an #include points up the layers (see above); move the helper down or the code up" >&2
  exit 1
fi
