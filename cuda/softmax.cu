// CUDA softmax / log_softmax, the twins of src/cpu/softmax.cpp (src/backend/softmax.h): one
// block per row (grid-stride over rows), the row max and sum reduced across the block, the
// same passes and formulas as the CPU (fast_exp for f32, exp for f64; a fully masked row
// gives softmax 0 / log_softmax -inf with zero gradient). The mask is read through its
// broadcast strides.
#include <cstdint>
#include <cmath>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "src/backend/softmax.h"
#include "src/backend/fast_exp.h"

namespace lb::backend {
namespace {

using cuda::block_reduce;
using cuda::kWarps;
using cuda::row_blocks;

template <typename T, bool kLog>
__global__ void softmax_kernel(const T* x, const T* m, cuda::Strides ms, T* y, int64_t rows, int64_t L) {
  __shared__ T shared[kWarps];
  const T kNegInf = -static_cast<T>(INFINITY);  // numeric_limits is host-only in device code
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * L;
    T* yr = y + r * L;
    T mx = kNegInf;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
      const T z = m == nullptr ? xr[j] : xr[j] + m[cuda::offset_of(r * L + j, ms)];
      yr[j] = z;
      mx = z > mx ? z : mx;
    }
    mx = block_reduce<T, true>(mx, shared);
    if (mx == kNegInf) {  // fully masked row
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) yr[j] = kLog ? kNegInf : T(0);
      continue;
    }
    T s = 0;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
      const T e = detail::fast_exp(yr[j] - mx);
      if (!kLog) yr[j] = e;
      s += e;
    }
    s = block_reduce<T, false>(s, shared);
    if (kLog) {
      const T lse = mx + log(s);
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) yr[j] -= lse;
    } else {
      const T inv = T(1) / s;
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) yr[j] *= inv;
    }
  }
}

template <typename T, bool kLog>
__global__ void softmax_backward_kernel(const T* g, const T* y, T* dz, int64_t rows, int64_t L) {
  __shared__ T shared[kWarps];
  const T kNegInf = -static_cast<T>(INFINITY);  // numeric_limits is host-only in device code
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * L;
    const T* yr = y + r * L;
    T* dr = dz + r * L;
    T s = 0;
    if (kLog) {
      T finite = 0;  // 1 when some entry of the row is not -inf
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
        s += gr[j];
        if (yr[j] != kNegInf) finite = 1;
      }
      finite = block_reduce<T, true>(finite, shared);
      s = block_reduce<T, false>(s, shared);
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) dr[j] = finite > 0 ? gr[j] - detail::fast_exp(yr[j]) * s : T(0);
    } else {
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) s += gr[j] * yr[j];
      s = block_reduce<T, false>(s, shared);
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) dr[j] = yr[j] * (gr[j] - s);
    }
  }
}

void forward(const Tensor& x, const Tensor& mask, const Shape& ms, Tensor& y, bool log) {
  const int64_t L = x.shape().back(), rows = L == 0 ? 0 : x.numel() / L;
  if (rows == 0) return;
  cuda::Strides mst;  // the mask's strides broadcast to x's shape, as a kernel argument
  if (mask.defined()) {
    LB_CHECK(x.dim() <= cuda::kMaxDims, "softmax on CUDA takes tensors of up to ", cuda::kMaxDims, " dimensions");
    mst.nd = static_cast<int>(x.dim());
    for (int d = 0; d < mst.nd; ++d) {
      mst.shape[d] = x.shape()[static_cast<size_t>(d)];
      mst.stride[d] = ms[static_cast<size_t>(d)];
    }
  }
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), log ? "log_softmax on CUDA" : "softmax on CUDA", [&](auto tag) {
    using T = decltype(tag);
    const T* m = mask.defined() ? static_cast<const T*>(mask.raw_data()) : nullptr;
    if (log)
      softmax_kernel<T, true><<<row_blocks(rows), cuda::kThreads, 0, s>>>(x.data<T>(), m, mst, y.data<T>(), rows, L);
    else
      softmax_kernel<T, false><<<row_blocks(rows), cuda::kThreads, 0, s>>>(x.data<T>(), m, mst, y.data<T>(), rows, L);
  });
  LB_CUDA_CHECK_LAUNCH("softmax_kernel");
}

void backward(const Tensor& g, const Tensor& y, Tensor& dz, bool log) {
  const int64_t L = g.shape().back(), rows = L == 0 ? 0 : g.numel() / L;
  if (rows == 0) return;
  const cudaStream_t s = cuda::stream(g.device().index);
  detail::dispatch_float(g.dtype(), "softmax backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    if (log)
      softmax_backward_kernel<T, true><<<row_blocks(rows), cuda::kThreads, 0, s>>>(g.data<T>(), y.data<T>(),
                                                                                  dz.data<T>(), rows, L);
    else
      softmax_backward_kernel<T, false><<<row_blocks(rows), cuda::kThreads, 0, s>>>(g.data<T>(), y.data<T>(),
                                                                                   dz.data<T>(), rows, L);
  });
  LB_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
}

}  // namespace

const SoftmaxKernels kCudaSoftmax{forward, backward};

}  // namespace lb::backend
