// CUDA dropout kernels, the twins of src/cpu/dropout.cpp (src/backend/dropout.h): one thread
// per mask byte (8 elements, whose draws lie in at most three Philox blocks), computing the
// blocks with the round function the CPU shares (philox4x32_10, lb/core/philox.h), so the
// device keeps and drops exactly the elements the CPU does.
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "lb/core/philox.h"
#include "src/backend/dropout.h"

namespace lb::backend {
namespace {

template <typename T>
__global__ void dropout_forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n, DropoutDraws d, T scale) {
  const uint32_t key0 = static_cast<uint32_t>(d.seed), key1 = static_cast<uint32_t>(d.seed >> 32);
  LB_CUDA_FOR_EACH(byte, (n + 7) / 8) {
    uint8_t m = 0;
    for (int k = 0; k < 8; ++k) {
      const int64_t i = 8 * byte + k;
      if (i >= n) break;
      const bool kept = philox_uniform(philox_draw(d.offset + static_cast<uint64_t>(i), d.subsequence, key0, key1)) > d.p;
      m |= static_cast<uint8_t>(kept << k);
      y[i] = kept ? x[i] * scale : T(0);
    }
    mask[byte] = m;
  }
}

template <typename T>
__global__ void dropout_backward_kernel(const T* g, const uint8_t* mask, T* dx, int64_t n, T scale) {
  LB_CUDA_FOR_EACH(i, n) dx[i] = ((mask[i >> 3] >> (i & 7)) & 1u) ? g[i] * scale : T(0);
}

void forward(const Tensor& x, Tensor& y, Tensor& mask, const DropoutDraws& d, double scale) {
  const int64_t n = x.numel();
  if (n == 0) return;
  detail::dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_forward_kernel<T><<<cuda::blocks_for((n + 7) / 8), cuda::kThreads, 0, cuda::stream(x.device().index)>>>(
        x.data<T>(), y.data<T>(), mask.data<uint8_t>(), n, d, static_cast<T>(scale));
  });
  LB_CUDA_CHECK_LAUNCH("dropout_forward_kernel");
}

void backward(const Tensor& g, const Tensor& mask, Tensor& dx, double scale) {
  const int64_t n = g.numel();
  if (n == 0) return;
  detail::dispatch_float(g.dtype(), "dropout backward", [&](auto tag) {
    using T = decltype(tag);
    dropout_backward_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(g.device().index)>>>(
        g.data<T>(), mask.data<uint8_t>(), dx.data<T>(), n, static_cast<T>(scale));
  });
  LB_CUDA_CHECK_LAUNCH("dropout_backward_kernel");
}

}  // namespace

const DropoutKernels kCudaDropout{forward, backward};

}  // namespace lb::backend
