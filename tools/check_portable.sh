#!/usr/bin/env bash
# The portable build (-DLEANBACK_PORTABLE=ON: baseline x86-64, no -march=native) and its
# run-time kernel choice: builds it into build-portable/ (or $LB_BUILD_DIR), checks that
# only the ISA-dispatched kernel files contain AVX/AVX-512 instructions, and runs the kernel
# tests at every LEANBACK_ISA level.   tools/check_portable.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${LB_BUILD_DIR:-$root/build-portable}"
LB_BUILD_DIR="$build" "$root/tools/build.sh" -DLEANBACK_PORTABLE=ON -DLEANBACK_CUDA=OFF >/dev/null
# The files whose functions are compiled for AVX-512 under isa_target.h and run only after
# cpu::isa_enabled says so.
kernels='src/cpu/(quantize_avx2|quantize_avx512|sgemm_avx512|sgemm_bf16|int8_gemm|int8_gemm_avx2|amx_gemm|codec)\.cpp\.o|src/ops/relu\.cpp\.o'
bad=0
while IFS= read -r obj; do
  n=$(objdump -d --no-show-raw-insn "$obj" | grep -c '%[yz]mm' || true)
  if [ "$n" -gt 0 ] && ! [[ "$obj" =~ $kernels ]]; then
    echo "error: $obj has $n AVX/AVX-512 instructions outside the dispatched kernels" >&2
    bad=1
  fi
done < <(find "$build"/CMakeFiles/lb_*.dir -name '*.o')  # the layer libraries (CMakeLists.txt)
[ "$bad" = 0 ] || exit 1
"$build/leanback" info
for isa in portable avx2 avx512 avx512-vnni avx512-bf16 amx; do
  for t in cpu_features_test gemm_serial_test sgemm_bf16_test int8_gemm_test amx_gemm_test hot_quantize_test hot_test nn_ops_test; do
    LEANBACK_ISA=$isa "$build/tests/$t" --gtest_brief=1 >/tmp/lb_portable_$$.log 2>&1 ||
      { echo "error: $t failed with LEANBACK_ISA=$isa" >&2; tail -20 /tmp/lb_portable_$$.log >&2; exit 1; }
  done
  echo "LEANBACK_ISA=$isa: kernel tests pass"
done
rm -f /tmp/lb_portable_$$.log
echo "portable build ok"
