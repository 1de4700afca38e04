// CUDA elementwise kernels, the twins of src/cpu/elementwise.cpp (src/backend/elementwise.h):
// the same formulas (src/backend/elementwise_formulas.h), one kernel per op and dtype, grid-
// stride loops over the output; inputs of any strides (broadcast strides are 0), so no copy
// is made to make them contiguous.
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "src/backend/elementwise.h"

namespace lb::backend {
namespace {

using cuda::offset_of;
using cuda::Strides;
using cuda::strides_of;

template <BinaryOp Op, typename T>
__global__ void binary_kernel(const T* a, Strides sa, const T* b, Strides sb, T* out, int64_t n) {
  LB_CUDA_FOR_EACH(i, n)
    out[i] = binary_value<Op>(a[offset_of(i, sa)], b[offset_of(i, sb)]);
}

template <UnaryOp Op, typename T>
__global__ void unary_kernel(const T* a, Strides sa, double s, T* out, int64_t n) {
  LB_CUDA_FOR_EACH(i, n)
    out[i] = unary_value<Op>(a[offset_of(i, sa)], s);
}

// v null: a constant derivative.
template <UnaryOp Op, typename T>
__global__ void unary_grad_kernel(const T* g, Strides sg, const T* v, Strides sv, double s, T* out, int64_t n) {
  LB_CUDA_FOR_EACH(i, n)
    out[i] = g[offset_of(i, sg)] * unary_derivative<Op>(v ? v[offset_of(i, sv)] : T(0), s);
}

// dst (any strides, not overlapping itself) += alpha · src (broadcast).
template <typename T>
__global__ void add_scaled_kernel(T* dst, Strides sd, const T* src, Strides ss, T alpha, int64_t n) {
  LB_CUDA_FOR_EACH(i, n)
    dst[offset_of(i, sd)] += alpha * src[offset_of(i, ss)];
}

template <typename T>
__global__ void scale_kernel(T* dst, Strides sd, T s, int64_t n) {
  LB_CUDA_FOR_EACH(i, n)
    dst[offset_of(i, sd)] *= s;
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Strides sa = strides_of(a, out.shape()), sb = strides_of(b, out.shape());
  const cudaStream_t st = cuda::stream(out.device().index);
  detail::dispatch_float(out.dtype(), "binary op", [&](auto tag) {
    using T = decltype(tag);
    dispatch_binary(op, [&](auto o) {
      binary_kernel<decltype(o)::value, T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(
          static_cast<const T*>(a.raw_data()), sa, static_cast<const T*>(b.raw_data()), sb, out.data<T>(), n);
    });
  });
  LB_CUDA_CHECK_LAUNCH("binary_kernel");
}

void unary(UnaryOp op, double s, const Tensor& a, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Strides sa = strides_of(a, out.shape());
  const cudaStream_t st = cuda::stream(out.device().index);
  detail::dispatch_float(out.dtype(), "unary op", [&](auto tag) {
    using T = decltype(tag);
    dispatch_unary(op, [&](auto o) {
      unary_kernel<decltype(o)::value, T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(
          static_cast<const T*>(a.raw_data()), sa, s, out.data<T>(), n);
    });
  });
  LB_CUDA_CHECK_LAUNCH("unary_kernel");
}

void unary_grad(UnaryOp op, double s, const Tensor& g, const Tensor& v, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Strides sg = strides_of(g, out.shape());
  const Strides sv = v.defined() ? strides_of(v, out.shape()) : Strides{};
  const cudaStream_t st = cuda::stream(out.device().index);
  detail::dispatch_float(out.dtype(), "unary backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pv = v.defined() ? static_cast<const T*>(v.raw_data()) : nullptr;
    dispatch_unary(op, [&](auto o) {
      unary_grad_kernel<decltype(o)::value, T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(
          static_cast<const T*>(g.raw_data()), sg, pv, sv, s, out.data<T>(), n);
    });
  });
  LB_CUDA_CHECK_LAUNCH("unary_grad_kernel");
}

void add_scaled_(Tensor& dst, const Tensor& src, double alpha) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Strides sd = strides_of(dst, dst.shape()), ss = strides_of(src, dst.shape());
  const cudaStream_t st = cuda::stream(dst.device().index);
  detail::dispatch_float(dst.dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    add_scaled_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(
        static_cast<T*>(dst.raw_data()), sd, static_cast<const T*>(src.raw_data()), ss, static_cast<T>(alpha), n);
  });
  LB_CUDA_CHECK_LAUNCH("add_scaled_kernel");
}

void scale_(Tensor& dst, double s) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Strides sd = strides_of(dst, dst.shape());
  const cudaStream_t st = cuda::stream(dst.device().index);
  detail::dispatch_float(dst.dtype(), "mul_scalar_", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(static_cast<T*>(dst.raw_data()), sd,
                                                                     static_cast<T>(s), n);
  });
  LB_CUDA_CHECK_LAUNCH("scale_kernel");
}

}  // namespace

const ElementwiseKernels kCudaElementwise{binary, unary, unary_grad, add_scaled_, scale_};

}  // namespace lb::backend
