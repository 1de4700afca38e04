#include "cuda/cublas.h"

#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "cuda/runtime.h"
#include "lb/core/error.h"

namespace lb::cuda {

// Overload resolution in an unevaluated operand: fails to compile where the written-out type
// is not one of the header's declarations (and takes no address, so links nothing).
static_assert(std::is_same_v<decltype(static_cast<CublasGemmEx>(&::cublasGemmEx)), CublasGemmEx>);
static_assert(std::is_same_v<decltype(static_cast<CublasGemmStridedBatchedEx>(&::cublasGemmStridedBatchedEx)),
                             CublasGemmStridedBatchedEx>);

const CublasApi& cublas() {
  static const CublasApi table = [] {
    const SharedLibrary lib = SharedLibrary::open({"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)},
                                                  LEANBACK_CUDA_LIBDIR, "a matrix product on a CUDA device");
    CublasApi api;
    LB_CUBLAS_FUNCTIONS(LB_API_LOAD)
    api.cublasGemmEx = reinterpret_cast<CublasGemmEx>(lib.symbol("cublasGemmEx"));
    api.cublasGemmStridedBatchedEx = reinterpret_cast<CublasGemmStridedBatchedEx>(lib.symbol("cublasGemmStridedBatchedEx"));
    return api;
  }();
  return table;
}

[[noreturn]] void fail_cublas(cublasStatus_t st, const char* call, const char* file, int line) {
  LB_FAIL("cuBLAS call ", call, " failed at ", file, ":", line, ": ", cublas().cublasGetStatusName(st), " (",
          cublas().cublasGetStatusString(st), ")");
}

cublasHandle_t cublas_handle(int device) {
  static std::mutex m;
  static auto* handles = new std::map<int, cublasHandle_t>;  // never destroyed (see caching_allocator.cu)
  const cudaStream_t s = stream(device);  // also sets the current device
  std::lock_guard<std::mutex> lock(m);
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  const CublasApi& api = cublas();
  cublasHandle_t h = nullptr;
  LB_CUBLAS_CHECK(api.cublasCreate(&h));
  LB_CUBLAS_CHECK(api.cublasSetStream(h, s));
  LB_CUBLAS_CHECK(api.cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  handles->emplace(device, h);
  return h;
}

}  // namespace lb::cuda
