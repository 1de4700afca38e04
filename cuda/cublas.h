// Internal to the CUDA kernels: checked cuBLAS calls (the message names the call, file and
// line) and one cuBLAS handle per device, bound to that device's stream (cuda/runtime.h).
#pragma once
#include <cublas_v2.h>

namespace lb::cuda {

[[noreturn]] void fail_cublas(cublasStatus_t st, const char* call, const char* file, int line);
// The handle of `device`, created on first use; the device is made current on every call (a
// handle must be used on the device it was created on). Defined in cuda/gemm.cu.
cublasHandle_t cublas_handle(int device);

}  // namespace lb::cuda

#define LB_CUBLAS_CHECK(call)                                                                \
  do {                                                                                       \
    const cublasStatus_t st_ = (call);                                                       \
    if (st_ != CUBLAS_STATUS_SUCCESS) ::lb::cuda::fail_cublas(st_, #call, __FILE__, __LINE__); \
  } while (0)
