// CUDA device allocator with the same per-tag accounting as the CPU one.
// TODO(caching): size-class caching with split/merge and free-and-retry (DESIGN.md); for now
// each block is a cudaMalloc, and an OOM reports requested and free bytes.
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>

#include "lb/core/allocator.h"
#include "lb/core/error.h"

namespace lb {

namespace {
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}
  void* allocate(size_t nbytes, MemTag tag) override {
    if (nbytes == 0) return nullptr;
    cudaSetDevice(device_);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes);
    if (err != cudaSuccess) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      LB_FAIL("CUDA out of memory on cuda:", device_, ": requested ", nbytes, " bytes (",
              mem_tag_name(tag), "), free ", free_b, " of ", total_b, ": ", cudaGetErrorString(err));
    }
    count_alloc(nbytes, tag);
    return p;
  }
  void deallocate(void* p, size_t nbytes, MemTag tag) override {
    if (p) cudaFree(p);
    count_free(nbytes, tag);
  }

 private:
  int device_;
};
}  // namespace

Allocator& cuda_allocator(int device) {
  static std::mutex m;
  static std::map<int, std::unique_ptr<CudaAllocator>> allocators;
  std::lock_guard<std::mutex> lock(m);
  auto& a = allocators[device];
  if (!a) a = std::make_unique<CudaAllocator>(device);
  return *a;
}

}  // namespace lb
