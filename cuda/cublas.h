// Internal to the CUDA kernels: cuBLAS, loaded on first use (lb/core/shared_library.h says
// why), checked calls (the message names the call, file and line) and one cuBLAS handle per
// device, bound to that device's stream (cuda/runtime.h).
#pragma once
#include <cublas_v2.h>

#include "lb/core/shared_library.h"

// The cuBLAS functions leanback calls; add one here before calling it.
#define LB_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate) X(cublasSetStream) X(cublasSetPointerMode) X(cublasGetStatusName) X(cublasGetStatusString)

namespace lb::cuda {

// The GEMMs' C symbols. cuBLAS's header also overloads both in C++ (a cudaDataType compute
// type, for old callers), so their types are written out; the static_asserts in cublas.cpp
// check them against the header.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                        int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                        cublasGemmAlgo_t);
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                                      int, int, const void*, const void*, cudaDataType, int,
                                                      long long, const void*, cudaDataType, int, long long,
                                                      const void*, void*, cudaDataType, int, long long, int,
                                                      cublasComputeType_t, cublasGemmAlgo_t);

struct CublasApi {
  LB_CUBLAS_FUNCTIONS(LB_API_MEMBER)
  CublasGemmEx cublasGemmEx = nullptr;
  CublasGemmStridedBatchedEx cublasGemmStridedBatchedEx = nullptr;
};
// libcublas.so.<major of the headers>, opened on the first call.
const CublasApi& cublas();

[[noreturn]] void fail_cublas(cublasStatus_t st, const char* call, const char* file, int line);
// The handle of `device`, created on first use; the device is made current on every call (a
// handle must be used on the device it was created on).
cublasHandle_t cublas_handle(int device);

}  // namespace lb::cuda

#define LB_CUBLAS_CHECK(call)                                                                \
  do {                                                                                       \
    const cublasStatus_t st_ = (call);                                                       \
    if (st_ != CUBLAS_STATUS_SUCCESS) ::lb::cuda::fail_cublas(st_, #call, __FILE__, __LINE__); \
  } while (0)
