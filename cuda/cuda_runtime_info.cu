// Device discovery and host<->device copies for Tensor::to(Device), on the devices' streams.
#include <cuda_runtime.h>

#include "cuda/runtime.h"
#include "lb/core/cuda_runtime_info.h"
#include "lb/core/tensor.h"

namespace lb {

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::vector<std::string> cuda_device_names() {
  std::vector<std::string> names;
  for (int i = 0; i < cuda_device_count(); ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess) names.emplace_back(p.name);
  }
  return names;
}

void cuda_synchronize(int device) { LB_CUDA_CHECK(cudaStreamSynchronize(cuda::stream(device))); }

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  LB_CHECK(d.is_cpu() || d.index < cuda_device_count(), "cannot move ", str(), " to ", d.str(),
           ": ", cuda_device_count(), " CUDA device(s) found");
  Tensor src = is_contiguous() ? *this : contiguous();
  Tensor out = Tensor::empty(shape(), dtype(), d);
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
