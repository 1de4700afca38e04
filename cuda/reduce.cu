// CUDA reduction kernels, the twins of src/cpu/reduce.cpp (src/backend/reduce.h): one thread
// per output element, walking its reduced elements through x's strides (coalesced for the
// column sums of a bias gradient, where neighbouring threads read neighbouring columns).
// Correct first; a block-per-row tree reduction for long contiguous rows is still to come.
#include <algorithm>
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "src/backend/reduce.h"

namespace lb::backend {
namespace {

using cuda::offset_of;
using cuda::Strides;

// The output's keepdim shape with x's strides (an output element's first input), and the
// reduced axes' sizes and strides (its other inputs, in row-major order of those axes).
struct Reduction {
  Strides first;
  Strides inner;
  int64_t count = 1;
};

Reduction reduction_of(const Tensor& x, const std::vector<int64_t>& dims) {
  LB_CHECK(x.dim() <= cuda::kMaxDims, "CUDA reductions take tensors of up to ", cuda::kMaxDims, " dimensions");
  Reduction r;
  r.first.nd = static_cast<int>(x.dim());
  for (int d = 0; d < r.first.nd; ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    r.first.shape[d] = reduced ? 1 : x.shape()[static_cast<size_t>(d)];
    r.first.stride[d] = x.strides()[static_cast<size_t>(d)];
    if (reduced) {
      r.inner.shape[r.inner.nd] = x.shape()[static_cast<size_t>(d)];
      r.inner.stride[r.inner.nd] = x.strides()[static_cast<size_t>(d)];
      ++r.inner.nd;
      r.count *= x.shape()[static_cast<size_t>(d)];
    }
  }
  return r;
}

template <typename T>
__global__ void sum_kernel(const T* x, Reduction r, T* out, int64_t n_out) {
  LB_CUDA_FOR_EACH(o, n_out) {
    const T* base = x + offset_of(o, r.first);
    T acc = 0;
    for (int64_t j = 0; j < r.count; ++j) acc += base[offset_of(j, r.inner)];
    out[o] = acc;
  }
}

template <typename T>
__global__ void max_kernel(const T* x, Strides first, int64_t len, int64_t stride, T* values, int64_t* indices,
                           int64_t n_out) {
  LB_CUDA_FOR_EACH(o, n_out) {
    const T* base = x + offset_of(o, first);
    T best = base[0];
    int64_t bi = 0;
    for (int64_t j = 1; j < len; ++j) {
      const T v = base[j * stride];
      if (v > best || (v != v && best == best)) {
        best = v;
        bi = j;
      }
    }
    values[o] = best;
    indices[o] = bi;
  }
}

// Each output element adds into its own input position: no two threads write one element.
template <typename T>
__global__ void max_backward_kernel(const T* g, Strides sg, const int64_t* indices, Strides first, int64_t stride,
                                    T* gx, int64_t n_out) {
  LB_CUDA_FOR_EACH(o, n_out) gx[offset_of(o, first) + indices[o] * stride] += g[offset_of(o, sg)];
}

void sum(const Tensor& x, const std::vector<int64_t>& dims, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Reduction r = reduction_of(x, dims);
  const cudaStream_t st = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    sum_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(static_cast<const T*>(x.raw_data()), r,
                                                                   out.data<T>(), n);
  });
  LB_CUDA_CHECK_LAUNCH("sum_kernel");
}

void max(const Tensor& x, int64_t dim, Tensor& values, Tensor& indices) {
  const int64_t n = values.numel();
  const bool scalar = x.dim() == 0;
  const Reduction r = reduction_of(x, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{dim});
  const int64_t len = scalar ? 1 : x.shape()[static_cast<size_t>(dim)];
  const int64_t stride = scalar ? 1 : x.strides()[static_cast<size_t>(dim)];
  const cudaStream_t st = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "max", [&](auto tag) {
    using T = decltype(tag);
    max_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(static_cast<const T*>(x.raw_data()), r.first, len,
                                                                   stride, values.data<T>(),
                                                                   indices.data<int64_t>(), n);
  });
  LB_CUDA_CHECK_LAUNCH("max_kernel");
}

void max_backward(const Tensor& g, const Tensor& indices, int64_t dim, Tensor& gx) {
  const int64_t n = indices.numel();
  const bool scalar = gx.dim() == 0;
  const Reduction r = reduction_of(gx, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{dim});
  const int64_t stride = scalar ? 0 : gx.strides()[static_cast<size_t>(dim)];
  const Strides sg = cuda::strides_of(g, g.shape());
  const cudaStream_t st = cuda::stream(gx.device().index);
  detail::dispatch_float(g.dtype(), "max backward", [&](auto tag) {
    using T = decltype(tag);
    max_backward_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(
        static_cast<const T*>(g.raw_data()), sg, indices.data<int64_t>(), r.first, stride, gx.data<T>(), n);
  });
  LB_CUDA_CHECK_LAUNCH("max_backward_kernel");
}

}  // namespace

const ReduceKernels kCudaReduce{sum, max, max_backward};

}  // namespace lb::backend
