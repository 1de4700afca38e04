#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU (the device tool's H200): builds leanback with
# CUDA, runs every test (CUDA tests run instead of skipping) and the GPU-relevant benchmarks,
# and writes a JSON summary to ${OUT:-.}/gpu_check.json. Target: under 6 minutes on an H200.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$root}"
build="$root/build-gpu"
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu_info.txt" 2>&1
"$root/tools/setup.sh"
# NCCL: the toolkit's, else the nvidia-nccl wheel PyTorch brings.
nccl_root=""
if [[ ! -f /usr/local/cuda/include/nccl.h ]]; then
  nccl_root="$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)"
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLEANBACK_CUDA=ON \
      -DLEANBACK_CUDA_ARCHS="90-real" ${nccl_root:+-DNCCL_ROOT="$nccl_root"} > "$out/gpu_configure.log" 2>&1
cmake --build "$build" -j"$(nproc)" > "$out/gpu_build.log" 2>&1
build_rc=$?
(cd "$build" && ctest -j8 --output-on-failure --timeout 300) > "$out/gpu_ctest.log" 2>&1
test_rc=$?
"$build/leanback" info > "$out/gpu_info_leanback.txt" 2>&1
cuda_tests=$(grep -c "CudaRuntime\|Cuda" "$out/gpu_ctest.log" || true)
# The NCCL group's collectives (one-rank communicator on this GPU).
"$build/tests/nccl_group_test" --gtest_filter='NcclGroup.*' > "$out/gpu_nccl.log" 2>&1
nccl_rc=$?
# Two ranks over MPI, one GPU each, where the machine has two or more.
if (( $(nvidia-smi -L 2>/dev/null | wc -l) >= 2 )) && command -v mpirun >/dev/null; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe \
    "$build/tests/dist_test" --gtest_filter='DistNccl.*' >> "$out/gpu_nccl.log" 2>&1 || nccl_rc=1
fi
skipped=$(grep -c "Skipped" "$out/gpu_ctest.log" || true)
end=$(date +%s)
cat > "$out/gpu_check.json" <<JSON
{"build_rc": $build_rc, "test_rc": $test_rc, "nccl_rc": $nccl_rc, "cuda_test_lines": $cuda_tests,
 "skipped_tests": $skipped, "seconds": $((end - start))}
JSON
cat "$out/gpu_check.json"
exit $(( build_rc != 0 || test_rc != 0 || nccl_rc != 0 ))
