// CUDA loss kernels, the twins of src/cpu/losses.cpp (src/backend/losses.h): cross-entropy
// with one block per row (max, Σ e^{x - max} and Σ x reduced over the block; the row's loss
// in f64 into a per-row buffer summed on the host in row order), its backward elementwise;
// the squared error's sum as per-block f64 partials summed on the host, its gradient
// elementwise. fast_exp for f32 as on the CPU.
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "lb/core/dispatch.h"
#include "src/backend/losses.h"
#include "src/backend/fast_exp.h"

namespace lb::backend {
namespace {

using cuda::block_reduce;
using cuda::kWarps;
using cuda::row_blocks;

template <typename T>
__global__ void ce_forward_kernel(const T* x, const int64_t* tgt, int64_t N, int64_t C, int64_t ignore_index,
                                  double eps, T* lse, double* row_loss) {
  __shared__ T shared[kWarps];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* xr = x + i * C;
    T mx = -static_cast<T>(INFINITY);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) mx = xr[j] > mx ? xr[j] : mx;
    mx = block_reduce<T, true>(mx, shared);
    T s = 0, sx = 0;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      s += detail::fast_exp(xr[j] - mx);
      sx += xr[j];
    }
    s = block_reduce<T, false>(s, shared);
    sx = block_reduce<T, false>(sx, shared);
    if (threadIdx.x == 0) {
      const double l = static_cast<double>(mx) + log(static_cast<double>(s));
      lse[i] = static_cast<T>(l);
      row_loss[i] = tgt[i] == ignore_index ? 0.0
                                           : (1.0 - eps) * (l - static_cast<double>(xr[tgt[i]])) +
                                                 eps * (l - static_cast<double>(sx) / static_cast<double>(C));
    }
  }
}

template <typename T>
__global__ void ce_backward_kernel(const T* x, const int64_t* tgt, const T* lse, int64_t N, int64_t C,
                                   int64_t ignore_index, T uniform, T hit, T coef, T* dx) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < N * C;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k / C, j = k % C;
    if (tgt[i] == ignore_index) {
      dx[k] = 0;
      continue;
    }
    T d = coef * (detail::fast_exp(x[k] - lse[i]) - uniform);
    if (j == tgt[i]) d -= coef * hit;
    dx[k] = d;
  }
}

template <typename T>
__global__ void squared_error_kernel(const T* a, const T* b, int64_t n, double* partial) {
  __shared__ double shared[kWarps];
  double s = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    s += d * d;
  }
  s = block_reduce<double, false>(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

template <typename T>
__global__ void squared_error_grad_kernel(const T* a, const T* b, int64_t n, T k, T* da, T* db) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T d = k * (a[i] - b[i]);
    da[i] = d;
    if (db) db[i] = -d;
  }
}

// n doubles from the device, summed on the host in order.
double host_sum(const Tensor& t, cudaStream_t s) {
  std::vector<double> h(static_cast<size_t>(t.numel()));
  LB_CUDA_CHECK(cudaMemcpyAsync(h.data(), t.raw_data(), h.size() * sizeof(double), cudaMemcpyDeviceToHost, s));
  LB_CUDA_CHECK(cudaStreamSynchronize(s));
  double total = 0;
  for (double v : h) total += v;
  return total;
}

double ce_forward(const Tensor& x, const Tensor& targets, int64_t ignore_index, double eps, Tensor& lse) {
  const int64_t N = x.size(0), C = x.size(1);
  if (N == 0) return 0.0;
  const cudaStream_t s = cuda::stream(x.device().index);
  Tensor row_loss = Tensor::empty({N}, DType::F64, x.device(), MemTag::Workspace);
  detail::dispatch_float(x.dtype(), "cross_entropy on CUDA", [&](auto tag) {
    using T = decltype(tag);
    ce_forward_kernel<T><<<row_blocks(N), cuda::kThreads, 0, s>>>(x.data<T>(), targets.data<int64_t>(), N, C,
                                                                  ignore_index, eps, lse.data<T>(),
                                                                  row_loss.data<double>());
  });
  LB_CUDA_CHECK_LAUNCH("ce_forward_kernel");
  return host_sum(row_loss, s);
}

void ce_backward(const Tensor& x, const Tensor& targets, const Tensor& lse, int64_t ignore_index, double eps,
                 double coef, Tensor& dx) {
  const int64_t N = x.size(0), C = x.size(1);
  if (N * C == 0) return;
  const cudaStream_t s = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "cross_entropy backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    ce_backward_kernel<T><<<cuda::blocks_for(N * C), cuda::kThreads, 0, s>>>(
        x.data<T>(), targets.data<int64_t>(), lse.data<T>(), N, C, ignore_index,
        static_cast<T>(eps / static_cast<double>(C)), static_cast<T>(1.0 - eps), static_cast<T>(coef), dx.data<T>());
  });
  LB_CUDA_CHECK_LAUNCH("ce_backward_kernel");
}

double squared_error_sum(const Tensor& a, const Tensor& b) {
  const int64_t n = a.numel();
  if (n == 0) return 0.0;
  const cudaStream_t s = cuda::stream(a.device().index);
  const unsigned blocks = cuda::blocks_for(n) < 1024 ? cuda::blocks_for(n) : 1024;
  Tensor partial = Tensor::empty({blocks}, DType::F64, a.device(), MemTag::Workspace);
  detail::dispatch_float(a.dtype(), "mse_loss on CUDA", [&](auto tag) {
    using T = decltype(tag);
    squared_error_kernel<T><<<blocks, cuda::kThreads, 0, s>>>(a.data<T>(), b.data<T>(), n, partial.data<double>());
  });
  LB_CUDA_CHECK_LAUNCH("squared_error_kernel");
  return host_sum(partial, s);
}

void squared_error_grad(const Tensor& a, const Tensor& b, double coef, Tensor& da, Tensor& db) {
  const int64_t n = a.numel();
  if (n == 0) return;
  const cudaStream_t s = cuda::stream(a.device().index);
  detail::dispatch_float(a.dtype(), "mse_loss backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    squared_error_grad_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(
        a.data<T>(), b.data<T>(), n, static_cast<T>(coef), da.data<T>(), db.defined() ? db.data<T>() : nullptr);
  });
  LB_CUDA_CHECK_LAUNCH("squared_error_grad_kernel");
}

}  // namespace

const LossKernels kCudaLosses{ce_forward, ce_backward, squared_error_sum, squared_error_grad};

}  // namespace lb::backend
