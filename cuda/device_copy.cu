// Tensor::to(Device): host<->device copies on the devices' streams (host to device through
// pinned staging, without blocking the host).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "cuda/runtime.h"
#include "lb/core/cuda_runtime_info.h"
#include "lb/core/tensor.h"
#include "src/backend/copy.h"

namespace lb {

namespace {

// Pinned staging for host→device copies (a training batch each step): the host data is
// copied into page-locked memory, and the DMA from there is queued on the device's stream
// without waiting, so the copy runs behind the kernels already queued and the host goes on
// (a copy from pageable memory would block the host until the device had caught up).
// A ring of slots per device; a slot is reused once its last copy has completed (its event).
// Larger copies than kMaxStaged go directly (synchronously): no large pinned allocations.
class PinnedStaging {
 public:
  static constexpr size_t kSlots = 8;
  static constexpr size_t kMaxStaged = size_t{64} << 20;

  // Queues dst (device) <- src (host), n bytes, on `stream`; returns false when n is too large.
  bool copy(void* dst, const void* src, size_t n, cudaStream_t stream) {
    if (n > kMaxStaged) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& slot = slots_[next_];
    next_ = (next_ + 1) % kSlots;
    if (slot.used) LB_CUDA_CHECK(cudaEventSynchronize(slot.done));  // its previous copy has read it
    if (slot.capacity < n) {
      if (slot.buffer) LB_CUDA_CHECK(cudaFreeHost(slot.buffer));
      slot.buffer = nullptr;
      slot.capacity = std::max(n, size_t{1} << 20);
      LB_CUDA_CHECK(cudaHostAlloc(&slot.buffer, slot.capacity, cudaHostAllocDefault));
    }
    if (!slot.done) LB_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
    std::memcpy(slot.buffer, src, n);
    LB_CUDA_CHECK(cudaMemcpyAsync(dst, slot.buffer, n, cudaMemcpyHostToDevice, stream));
    LB_CUDA_CHECK(cudaEventRecord(slot.done, stream));
    slot.used = true;
    return true;
  }

 private:
  struct Slot {
    void* buffer = nullptr;
    size_t capacity = 0;
    cudaEvent_t done = nullptr;
    bool used = false;
  };
  std::mutex mutex_;
  Slot slots_[kSlots];
  size_t next_ = 0;
};

PinnedStaging& staging_for(int device) {
  static std::mutex m;
  static auto* per_device = new std::map<int, std::unique_ptr<PinnedStaging>>;  // never destroyed
  std::lock_guard<std::mutex> lock(m);
  auto& s = (*per_device)[device];
  if (!s) s = std::make_unique<PinnedStaging>();
  return *s;
}

}  // namespace

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  LB_CHECK(d.is_cpu() || d.index < cuda_device_count(), "cannot move ", str(), " to ", d.str(),
           ": ", cuda_device_count(), " CUDA device(s) found");
  const Tensor src = backend::contiguous(*this);
  Tensor out = Tensor::empty(shape(), dtype(), d);
  // Host to device: through pinned staging, queued on the device's stream without waiting
  // (kernels later queued there see the data; the host's side may be freed at once).
  if (device().is_cpu()) {
    const cudaStream_t st = cuda::stream(d.index);
    if (staging_for(d.index).copy(out.raw_data(), src.raw_data(), nbytes(), st)) return out;
  }
  const cudaMemcpyKind kind = d.is_cpu() ? cudaMemcpyDeviceToHost
                              : device().is_cpu() ? cudaMemcpyHostToDevice
                                                  : cudaMemcpyDeviceToDevice;
  // On the device's stream, after the kernels queued there, and waited for: the host may
  // read (or free) its side as soon as this returns.
  // Device to device: the source's kernels finish first; the copy then goes on the target's
  // stream (a block of the caching allocator may still be read by earlier kernels there).
  if (!d.is_cpu() && !device().is_cpu()) LB_CUDA_CHECK(cudaStreamSynchronize(cuda::stream(device().index)));
  const cudaStream_t st = cuda::stream(d.is_cpu() ? device().index : d.index);
  const cudaError_t err = cudaMemcpyAsync(out.raw_data(), src.raw_data(), nbytes(), kind, st);
  LB_CHECK(err == cudaSuccess, "copy ", str(), " -> ", d.str(), " failed: ", cudaGetErrorString(err));
  LB_CUDA_CHECK(cudaStreamSynchronize(st));
  return out;
}

}  // namespace lb
