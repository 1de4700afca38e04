// CUDA fast Walsh–Hadamard transform, the twin of src/cpu/fwht.cpp (src/backend/fwht.h): one
// thread per block of B values (one outer row, one block, one inner column), which loads the
// zero-padded block and runs the butterfly with h doubling from 1 in place in y: the same
// additions in the same order as the CPU's scalar butterfly, so the same values. Simple
// rather than fast (HOT's 16-point transforms are what matter; a shared-memory kernel for
// large B can come when a GPU measures it).
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "src/backend/fwht.h"

namespace lb::backend {
namespace {

template <typename T>
__global__ void fwht_kernel(const T* x, T* y, int64_t outer, int64_t L, int64_t Lp, int64_t inner, int64_t B) {
  const int64_t nblocks = Lp / B;
  LB_CUDA_FOR_EACH(t, outer * nblocks * inner) {
    const int64_t c = t % inner, b = (t / inner) % nblocks, o = t / (inner * nblocks);
    T* base = y + (o * Lp + b * B) * inner + c;  // element r of the block: base[r * inner]
    for (int64_t r = 0; r < B; ++r) {
      const int64_t l = b * B + r;
      base[r * inner] = l < L ? x[(o * L + l) * inner + c] : T(0);
    }
    for (int64_t h = 1; h < B; h <<= 1)
      for (int64_t i = 0; i < B; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          const T a = base[j * inner], bb = base[(j + h) * inner];
          base[j * inner] = a + bb;
          base[(j + h) * inner] = a - bb;
        }
  }
}

void forward(const Tensor& x, Tensor& y, int64_t outer, int64_t L, int64_t Lp, int64_t inner, int64_t block_log2) {
  const int64_t B = int64_t{1} << block_log2, n = outer * (Lp / B) * inner;
  if (n == 0) return;
  detail::dispatch_float(x.dtype(), "fwht on CUDA", [&](auto tag) {
    using T = decltype(tag);
    fwht_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(x.device().index)>>>(
        x.data<T>(), y.data<T>(), outer, L, Lp, inner, B);
  });
  LB_CUDA_CHECK_LAUNCH("fwht_kernel");
}

}  // namespace

const FwhtKernels kCudaFwht{forward};

}  // namespace lb::backend
