// CUDA batch-norm kernels, the twins of src/cpu/batch_norm.cpp (src/backend/batch_norm.h):
// one block per channel for the statistics and the backward's sums (each thread sums its
// share in double, then the block reduces), the normalisation one thread per element. The
// CPU sums each of the N blocks of S values in T first, so the sums agree to rounding.
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "lb/core/dispatch.h"
#include "src/backend/batch_norm.h"

namespace lb::backend {
namespace {

using cuda::block_reduce;
using cuda::kWarps;
using cuda::row_blocks;

template <typename T>
__global__ void stats_kernel(const T* x, int64_t N, int64_t C, int64_t S, T* mean, double* var) {
  __shared__ double shared[kWarps];
  const int64_t M = N * S;
  const double inv_m = 1.0 / static_cast<double>(M);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double acc = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) acc += x[((i / S) * C + c) * S + i % S];
    const T mt = static_cast<T>(block_reduce<double, false>(acc, shared) * inv_m);
    acc = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const T d = x[((i / S) * C + c) * S + i % S] - mt;
      acc += d * d;
    }
    acc = block_reduce<double, false>(acc, shared) * inv_m;
    if (threadIdx.x == 0) {
      mean[c] = mt;
      var[c] = acc;
    }
  }
}

template <typename T>
__global__ void apply_kernel(const T* x, const T* scale, const T* shift, T* y, int64_t C, int64_t S, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / S) % C;
    y[i] = x[i] * scale[c] + shift[c];
  }
}

template <typename T>
__global__ void backward_kernel(const T* g, const T* x, const T* w, const T* mean, const T* rstd, bool training,
                                T* dx, T* dw, T* db, int64_t N, int64_t C, int64_t S) {
  __shared__ double shared[kWarps];
  const int64_t M = N * S;
  const double inv_m = 1.0 / static_cast<double>(M);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const T mu = mean[c], rs = rstd[c];
    double sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t at = ((i / S) * C + c) * S + i % S;
      sg += g[at];
      sgx += g[at] * ((x[at] - mu) * rs);
    }
    sg = block_reduce<double, false>(sg, shared);
    sgx = block_reduce<double, false>(sgx, shared);
    if (threadIdx.x == 0) {
      if (dw) dw[c] = static_cast<T>(sgx);
      if (db) db[c] = static_cast<T>(sg);
    }
    if (!dx) continue;
    const T k = (w ? w[c] : T(1)) * rs;
    const T mg = static_cast<T>(training ? sg * inv_m : 0.0);
    const T mgx = static_cast<T>(training ? sgx * inv_m : 0.0);
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t at = ((i / S) * C + c) * S + i % S;
      dx[at] = k * (g[at] - mg - (x[at] - mu) * rs * mgx);
    }
  }
}

void stats(const Tensor& x, int64_t N, int64_t C, int64_t S, Tensor& mean, Tensor& var) {
  if (C == 0) return;
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "batch_norm on CUDA", [&](auto tag) {
    using T = decltype(tag);
    stats_kernel<T><<<row_blocks(C), cuda::kThreads, 0, s>>>(x.data<T>(), N, C, S, mean.data<T>(),
                                                             var.data<double>());
  });
  LB_CUDA_CHECK_LAUNCH("stats_kernel");
}

void apply(const Tensor& x, const Tensor& scale, const Tensor& shift, Tensor& y, int64_t N, int64_t C, int64_t S) {
  const int64_t n = N * C * S;
  if (n == 0) return;
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "batch_norm on CUDA", [&](auto tag) {
    using T = decltype(tag);
    apply_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(x.data<T>(), scale.data<T>(), shift.data<T>(),
                                                                   y.data<T>(), C, S, n);
  });
  LB_CUDA_CHECK_LAUNCH("apply_kernel");
}

void backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
              bool training, Tensor& dx, Tensor& dw, Tensor& db, int64_t N, int64_t C, int64_t S) {
  if (C == 0) return;
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "batch_norm backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T><<<row_blocks(C), cuda::kThreads, 0, s>>>(
        g.data<T>(), x.data<T>(), data_or_null<T>(w), mean.data<T>(), rstd.data<T>(), training,
        data_or_null<T>(dx), data_or_null<T>(dw), data_or_null<T>(db), N, C, S);
  });
  LB_CUDA_CHECK_LAUNCH("backward_kernel");
}

}  // namespace

const BatchNormKernels kCudaBatchNorm{stats, apply, backward};

}  // namespace lb::backend
