// The CUDA device allocator: the caching allocator (lb/core/caching_allocator.h, tested on
// the CPU with a fake device) over cudaMalloc / cudaFree, one per device.
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "lb/core/caching_allocator.h"
#include "lb/core/error.h"

namespace lb {

namespace {
class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  void* raw_alloc(size_t nbytes) override {
    set_device();
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the recorded error: out of memory is an answer here
      return nullptr;
    }
    LB_CHECK(err == cudaSuccess, "cudaMalloc(", nbytes, ") on ", name(), " failed: ", cudaGetErrorString(err));
    return p;
  }
  void raw_free(void* p) override {
    set_device();
    const cudaError_t err = cudaFree(p);
    // Never throw from here (destructors call it); a failed free is a broken context anyway.
    if (err != cudaSuccess) (void)cudaGetLastError();
  }
  void mem_info(size_t& free_bytes, size_t& total_bytes) override {
    set_device();
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      free_bytes = total_bytes = 0;
    }
  }
  std::string name() const override { return "cuda:" + std::to_string(device_); }

 private:
  void set_device() {
    const cudaError_t err = cudaSetDevice(device_);
    LB_CHECK(err == cudaSuccess, "cudaSetDevice(", device_, ") failed: ", cudaGetErrorString(err));
  }
  int device_;
};

struct DeviceAllocator {
  explicit DeviceAllocator(int device) : memory(device), allocator(memory) {}
  CudaMemory memory;
  CachingAllocator allocator;
};
}  // namespace

Allocator& cuda_allocator(int device) {
  // Never destroyed (as the CPU allocator): storages of other static objects may be freed
  // after static destructors ran, and the CUDA context may be gone by then.
  static std::mutex m;
  static auto* allocators = new std::map<int, std::unique_ptr<DeviceAllocator>>;
  std::lock_guard<std::mutex> lock(m);
  auto& a = (*allocators)[device];
  if (!a) a = std::make_unique<DeviceAllocator>(device);
  return a->allocator;
}

}  // namespace lb
