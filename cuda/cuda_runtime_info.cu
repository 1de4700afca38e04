// Device discovery (lb/core/cuda_runtime_info.h). Moves between devices: cuda/device_copy.cu.
#include <cuda_runtime.h>

#include "cuda/runtime.h"
#include "lb/core/cuda_runtime_info.h"

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

}  // namespace lb
