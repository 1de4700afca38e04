// CUDA runtime helpers shared by the kernels: checked calls that name the call, file and
// line, the one stream per device every kernel and copy is issued on (so work on a device is
// ordered without extra synchronisation; the host waits only where it reads results), and
// launch geometry.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace lb::cuda {

[[noreturn]] void fail(cudaError_t err, const char* call, const char* file, int line);
inline void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) fail(err, call, file, line);
}

// The stream of device `device` (created on first use; the current device is set to it).
cudaStream_t stream(int device);

// Blocks of kThreads for n elements, capped (kernels loop grid-stride over the rest).
constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

}  // namespace lb::cuda

#define LB_CUDA_CHECK(call) ::lb::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad configuration shows here, a fault at the next synchronisation.
#define LB_CUDA_CHECK_LAUNCH(name) ::lb::cuda::check(cudaGetLastError(), name, __FILE__, __LINE__)
