// See runtime.h.
#include "cuda/runtime.h"

#include <map>
#include <mutex>

#include "lb/core/error.h"

namespace lb::cuda {

void fail(cudaError_t err, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so that the caller may go on
  LB_FAIL("CUDA call ", call, " failed at ", file, ":", line, ": ", cudaGetErrorName(err), " (",
          cudaGetErrorString(err), ")");
}

cudaStream_t stream(int device) {
  static std::mutex m;
  static auto* streams = new std::map<int, cudaStream_t>;  // never destroyed (see caching_allocator.cu)
  LB_CUDA_CHECK(cudaSetDevice(device));
  std::lock_guard<std::mutex> lock(m);
  auto it = streams->find(device);
  if (it != streams->end()) return it->second;
  cudaStream_t s = nullptr;
  LB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  streams->emplace(device, s);
  return s;
}

}  // namespace lb::cuda
