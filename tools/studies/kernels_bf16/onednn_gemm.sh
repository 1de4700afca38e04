#!/usr/bin/env bash
# Our GEMM kernels against oneDNN's matmul (Debian libdnnl-dev, installed here when missing),
# one thread each, shape by shape: f32, bf16 (bf16 operands, f32 accumulation) and int8 (s8
# operands, s32 results). Prints a table and, with OUT, appends one JSON line per row.
#   tools/studies/kernels_bf16/onednn_gemm.sh [OUT]        PRECISIONS="f32 bf16 int8" ITERS=5 LB=build/leanback
# Ours is timed from f32 inputs (bf16/int8 rounding happens while packing, as in training);
# oneDNN's from inputs already in its type (conversion not timed), so the comparison is
# generous to oneDNN.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
out="${1:-}"
lb="${LB:-build/leanback}"
iters="${ITERS:-5}"
if [[ ! -f /usr/include/oneapi/dnnl/dnnl.hpp ]]; then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get install -y libdnnl-dev >/dev/null || { echo "onednn_gemm.sh: could not install libdnnl-dev" >&2; exit 1; }
fi
[[ -x "$lb" ]] || { echo "onednn_gemm.sh: $lb not built (tools/build.sh)" >&2; exit 1; }
bin="build/onednn_gemm"
if [[ ! -x "$bin" || tools/studies/kernels_bf16/onednn_gemm.cpp -nt "$bin" ]]; then
  mkdir -p build
  g++ -std=c++17 -O2 -o "$bin" tools/studies/kernels_bf16/onednn_gemm.cpp -ldnnl
fi
export OMP_NUM_THREADS=1
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "one thread; $cpu; $("$lb" info 2>/dev/null | grep -m1 '^CPU:' || true)"
printf "%-4s %5s %5s %5s %-2s %9s %9s %6s  %s\n" prec M N K op ours onednn ratio "oneDNN impl"
shapes=("4096 3072 768 N N" "4096 768 3072 N T" "3072 768 4096 T N" "256 1024 2304 N N" "512 4608 1024 N T" "512 480 512 N N")
for prec in ${PRECISIONS:-f32 bf16 int8}; do
  for s in "${shapes[@]}"; do
    read -r m n k ta tb <<<"$s"
    flags=(); [[ $ta == T ]] && flags+=(--ta); [[ $tb == T ]] && flags+=(--tb)
    ours_json="$("$lb" bench gemm --precision "$prec" --m "$m" --n "$n" --k "$k" "${flags[@]}" --iters "$iters" --json | tail -1)"
    theirs_json="$("$bin" "$prec" "$m" "$n" "$k" "${flags[@]}" --iters "$iters")"
    python3 - "$prec" "$ours_json" "$theirs_json" "$cpu" "$out" <<'PY'
import json, sys
prec, ours, theirs, cpu, out = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
r = ours["results"][0]
mine = r["ours_gflops"] if prec == "f32" else r[prec + "_gflops"]
op = ("T" if r["ta"] else "N") + ("T" if r["tb"] else "N")
print(f"{prec:4s} {r['m']:5d} {r['n']:5d} {r['k']:5d} {op:2s} {mine:9.1f} {theirs['gflops']:9.1f} "
      f"{mine / theirs['gflops']:6.2f}  {theirs['impl']}")
if out:
    with open(out, "a") as f:
        f.write(json.dumps({"precision": prec, "m": r["m"], "n": r["n"], "k": r["k"], "op": op,
                            "leanback_gflops": mine, "leanback_kernel": ours["kernel"],
                            "onednn_gflops": theirs["gflops"], "onednn_impl": theirs["impl"],
                            "onednn_version": theirs["version"], "cpu": cpu}) + "\n")
PY
  done
done
