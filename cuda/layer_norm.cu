// CUDA layer norm, the twin of src/cpu/layer_norm.cpp (src/backend/layer_norm.h): one block
// per row for the forward (mean, then the variance by a second pass over the row, as the CPU:
// no cancellation) and for dx (the row sums Σ g w and Σ g w x̂); dw and db by one thread per
// column walking the rows (neighbouring threads read neighbouring columns: coalesced), x̂
// recomputed from the saved mean and rstd.
#include <cmath>
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "lb/core/dispatch.h"
#include "src/backend/layer_norm.h"

namespace lb::backend {
namespace {

using cuda::block_reduce;
using cuda::kWarps;
using cuda::row_blocks;

template <typename T>
__global__ void forward_kernel(const T* x, const T* w, const T* b, T* y, T* mean_out, T* rstd_out, int64_t R,
                               int64_t C, double eps) {
  __shared__ T shared[kWarps];
  const T inv_c = T(1) / static_cast<T>(C);
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    T s = 0;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += xr[j];
    const T mu = block_reduce<T, false>(s, shared) * inv_c;
    T v = 0;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) v += (xr[j] - mu) * (xr[j] - mu);
    v = block_reduce<T, false>(v, shared);
    const T rs = static_cast<T>(1.0 / sqrt(static_cast<double>(v * inv_c) + eps));
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      T o = (xr[j] - mu) * rs;
      if (w) o = o * w[j];
      if (b) o = o + b[j];
      yr[j] = o;
    }
    if (mean_out && threadIdx.x == 0) {
      mean_out[r] = mu;
      rstd_out[r] = rs;
    }
  }
}

template <typename T>
__global__ void dx_kernel(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx, int64_t R,
                          int64_t C) {
  __shared__ T shared[kWarps];
  const T inv_c = T(1) / static_cast<T>(C);
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* gr = g + r * C;
    const T* xr = x + r * C;
    const T mu = mean[r], rs = rstd[r];
    T a = 0, c = 0;  // Σ dx̂, Σ dx̂ x̂
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      const T d = w ? gr[j] * w[j] : gr[j];
      a += d;
      c += d * ((xr[j] - mu) * rs);
    }
    a = block_reduce<T, false>(a, shared) * inv_c;
    c = block_reduce<T, false>(c, shared) * inv_c;
    T* dr = dx + r * C;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      const T d = w ? gr[j] * w[j] : gr[j];
      dr[j] = rs * (d - a - (xr[j] - mu) * rs * c);
    }
  }
}

template <typename T>
__global__ void dw_db_kernel(const T* g, const T* x, const T* mean, const T* rstd, T* dw, T* db, int64_t R,
                             int64_t C) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < C;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T sw = 0, sb = 0;
    for (int64_t r = 0; r < R; ++r) {
      const T gv = g[r * C + j];
      sw += gv * ((x[r * C + j] - mean[r]) * rstd[r]);
      sb += gv;
    }
    if (dw) dw[j] = sw;
    if (db) db[j] = sb;
  }
}

void forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, Tensor& mean, Tensor& rstd, double eps) {
  const int64_t C = x.size(-1), R = x.numel() / C;
  if (R == 0) return;
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "layer_norm on CUDA", [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<row_blocks(R), cuda::kThreads, 0, s>>>(x.data<T>(), data_or_null<T>(w), data_or_null<T>(b), y.data<T>(),
                                                               data_or_null<T>(mean), data_or_null<T>(rstd), R, C, eps);
  });
  LB_CUDA_CHECK_LAUNCH("layer_norm forward_kernel");
}

void backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, Tensor& dx,
              Tensor& dw, Tensor& db) {
  const int64_t C = x.size(-1), R = x.numel() / C;
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "layer_norm backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    if (dx.defined() && R > 0)
      dx_kernel<T><<<row_blocks(R), cuda::kThreads, 0, s>>>(g.data<T>(), x.data<T>(), data_or_null<T>(w), mean.data<T>(),
                                                            rstd.data<T>(), dx.data<T>(), R, C);
    if (dw.defined() || db.defined())
      dw_db_kernel<T><<<cuda::blocks_for(C), cuda::kThreads, 0, s>>>(g.data<T>(), x.data<T>(), mean.data<T>(),
                                                                     rstd.data<T>(), data_or_null<T>(dw), data_or_null<T>(db), R, C);
  });
  LB_CUDA_CHECK_LAUNCH("layer_norm backward kernels");
}

}  // namespace

const LayerNormKernels kCudaLayerNorm{forward, backward};

}  // namespace lb::backend
