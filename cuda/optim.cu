// CUDA optimizer kernels, the twins of src/cpu/optim.cpp (src/backend/optim.h): the same
// per-element formulas in grid-stride kernels; Σ g² as per-block tree sums in double added
// atomically into one device double, read back by the host (clipping needs the norm there).
#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "src/backend/optim.h"

namespace lb::backend {
namespace {

template <typename T>
__global__ void adam_kernel(T* w, const T* g, T* m, T* v, AdamCoefs<T> c, int64_t n) {
  LB_CUDA_FOR_EACH(i, n) adam_update(w[i], g[i], m[i], v[i], c);
}

template <typename T>
__global__ void sgd_kernel(T* w, const T* g, T* buf, SgdCoefs<T> c, int64_t n) {
  LB_CUDA_FOR_EACH(i, n) sgd_update(w[i], g[i], buf ? buf + i : nullptr, c);
}

template <typename T>
__global__ void sum_squares_kernel(const T* g, int64_t n, double* out) {
  __shared__ double part[cuda::kThreads];
  double s = 0;
  LB_CUDA_FOR_EACH(i, n) s += static_cast<double>(g[i]) * g[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int half = cuda::kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

template <typename T>
__global__ void scale_in_double_kernel(T* g, double coef, int64_t n) {
  LB_CUDA_FOR_EACH(i, n) g[i] = static_cast<T>(g[i] * coef);
}

template <typename T>
void adam(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamCoefs<T>& c) {
  const int64_t n = w.numel();
  if (n == 0) return;
  adam_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(w.device().index)>>>(
      w.data<T>(), g.data<T>(), m.data<T>(), v.data<T>(), c, n);
  LB_CUDA_CHECK_LAUNCH("adam_kernel");
}

template <typename T>
void sgd(Tensor& w, const Tensor& g, Tensor& buf, const SgdCoefs<T>& c) {
  const int64_t n = w.numel();
  if (n == 0) return;
  sgd_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(w.device().index)>>>(
      w.data<T>(), g.data<T>(), c.momentum ? buf.data<T>() : nullptr, c, n);
  LB_CUDA_CHECK_LAUNCH("sgd_kernel");
}

double sum_squares(const Tensor& g) {
  const int64_t n = g.numel();
  if (n == 0) return 0.0;
  const cudaStream_t st = cuda::stream(g.device().index);
  Tensor acc = Tensor::zeros({1}, DType::F64, g.device(), MemTag::Workspace);
  detail::dispatch_float(g.dtype(), "clip_grad_norm", [&](auto tag) {
    using T = decltype(tag);
    sum_squares_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(g.data<T>(), n, acc.data<double>());
  });
  LB_CUDA_CHECK_LAUNCH("sum_squares_kernel");
  double host = 0;
  LB_CUDA_CHECK(cudaMemcpyAsync(&host, acc.raw_data(), sizeof host, cudaMemcpyDeviceToHost, st));
  LB_CUDA_CHECK(cudaStreamSynchronize(st));
  return host;
}

void scale_in_double(Tensor& g, double coef) {
  const int64_t n = g.numel();
  if (n == 0) return;
  detail::dispatch_float(g.dtype(), "clip_grad_norm", [&](auto tag) {
    using T = decltype(tag);
    scale_in_double_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(g.device().index)>>>(
        g.data<T>(), coef, n);
  });
  LB_CUDA_CHECK_LAUNCH("scale_in_double_kernel");
}

}  // namespace

// No row-sparse update yet: a CUDA run gets dense gradients (the embedding builds them there).
const OptimKernels kCudaOptim{adam<float>, adam<double>, nullptr, nullptr, sgd<float>, sgd<double>, sum_squares,
                              scale_in_double};

}  // namespace lb::backend
