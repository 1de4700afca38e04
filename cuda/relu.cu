// CUDA ReLU kernels, the twins of src/cpu/relu.cpp (src/backend/relu.h): one thread per 8
// elements, so each mask byte has a single writer.
#include <cstdint>

#include "cuda/runtime.h"
#include "lb/core/dispatch.h"
#include "src/backend/relu.h"

namespace lb::backend {
namespace {

template <typename T>
__global__ void forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n) {
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b * 8 < n;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint8_t byte = 0;
    for (int k = 0; k < 8 && b * 8 + k < n; ++k) {
      const T v = x[b * 8 + k];
      const bool pos = v > T(0);
      y[b * 8 + k] = pos ? v : T(0);
      byte |= static_cast<uint8_t>(pos << k);
    }
    mask[b] = byte;
  }
}

template <typename T>
__global__ void backward_kernel(const T* g, const uint8_t* mask, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dx[i] = ((mask[i >> 3] >> (i & 7)) & 1u) ? g[i] : T(0);
}

void forward(const Tensor& x, Tensor& y, Tensor& mask) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "relu on CUDA", [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<cuda::blocks_for((n + 7) / 8), cuda::kThreads, 0, s>>>(x.data<T>(), y.data<T>(),
                                                                              mask.data<uint8_t>(), n);
  });
  LB_CUDA_CHECK_LAUNCH("relu forward_kernel");
}

void backward(const Tensor& g, const Tensor& mask, Tensor& dx) {
  const int64_t n = g.numel();
  if (n == 0) return;
  const cudaStream_t s = cuda::stream(g.device().index);
  detail::dispatch_float(g.dtype(), "relu backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(g.data<T>(), mask.data<uint8_t>(),
                                                                     dx.data<T>(), n);
  });
  LB_CUDA_CHECK_LAUNCH("relu backward_kernel");
}

}  // namespace

const ReluKernels kCudaRelu{forward, backward};

}  // namespace lb::backend
