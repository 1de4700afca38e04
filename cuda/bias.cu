// CUDA bias kernels of Linear, the twins of src/cpu/bias.cpp (src/backend/bias.h): a
// grid-stride copy of b into every row, and one thread per column summing its rows (threads
// of a warp read neighbouring columns of a row: coalesced). Correct first; a split over rows
// for few, long columns (a classifier's) is still to come.
#include <cstdint>

#include "cuda/runtime.h"
#include "lb/core/dispatch.h"
#include "src/backend/bias.h"

namespace lb::backend {
namespace {

template <typename T>
__global__ void fill_rows_kernel(T* y, const T* b, int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = b[i % cols];
}

template <typename T>
__global__ void column_sums_kernel(const T* g, T* out, int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T acc = 0;
    for (int64_t r = 0; r < rows; ++r) acc += g[r * cols + c];
    out[c] = acc;
  }
}

void fill_rows(Tensor& y, const Tensor& b) {
  const int64_t cols = b.numel(), n = cols == 0 ? 0 : y.numel();
  if (n == 0) return;
  const cudaStream_t s = cuda::stream(y.device().index);
  detail::dispatch_float(y.dtype(), "linear on CUDA", [&](auto tag_) {
    using T = decltype(tag_);
    fill_rows_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(y.data<T>(), b.data<T>(), n, cols);
  });
  LB_CUDA_CHECK_LAUNCH("fill_rows_kernel");
}

void column_sums(const Tensor& g, Tensor& out) {
  const int64_t cols = out.numel(), rows = cols == 0 ? 0 : g.numel() / cols;
  if (cols == 0) return;
  const cudaStream_t s = cuda::stream(g.device().index);
  detail::dispatch_float(g.dtype(), "linear backward on CUDA", [&](auto tag_) {
    using T = decltype(tag_);
    column_sums_kernel<T><<<cuda::blocks_for(cols), cuda::kThreads, 0, s>>>(g.data<T>(), out.data<T>(), rows, cols);
  });
  LB_CUDA_CHECK_LAUNCH("column_sums_kernel");
}

}  // namespace

const BiasKernels kCudaBias{fill_rows, column_sums};

}  // namespace lb::backend
