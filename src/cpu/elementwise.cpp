// CPU elementwise kernels (src/backend/elementwise.h). Fast path: equal shapes, contiguous;
// general path: broadcast strides walked row by row (last axis inner), rows split across
// OpenMP threads when the tensor is large. One loop per op (the formulas are template
// parameters), so GCC vectorises each.
#include "src/backend/elementwise.h"

#include <cstring>
#include <type_traits>

#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "src/backend/copy.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

// Element offset of row `r` (all axes but the last) for a layout with `strides`.
inline int64_t row_offset(int64_t r, const Shape& shape, const Shape& strides) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    const int64_t i = r % shape[d];
    r /= shape[d];
    off += i * strides[d];
  }
  return off;
}

// o = f(a, b) over out's shape; a and b broadcast to it with any strides.
template <typename T, typename F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const Shape& os = out.shape();
  T* o = out.data<T>();
  const int64_t n = out.numel();
  if (a.shape() == os && b.shape() == os && a.is_contiguous() && b.is_contiguous()) {
    const T* x = a.data<T>();
    const T* y = b.data<T>();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    return;
  }
  const Shape sa = detail::broadcast_strides(a, os), sb = detail::broadcast_strides(b, os);
  const T* x = static_cast<const T*>(a.raw_data());
  const T* y = static_cast<const T*>(b.raw_data());
  const int64_t cols = os.empty() ? 1 : os.back();
  const int64_t rows = cols == 0 ? 0 : n / cols;
  const int64_t xa = os.empty() ? 0 : sa.back(), yb = os.empty() ? 0 : sb.back();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + row_offset(r, os, sa);
    const T* yr = y + row_offset(r, os, sb);
    T* orow = o + r * cols;
    if (xa == 1 && yb == 1)
      for (int64_t j = 0; j < cols; ++j) orow[j] = f(xr[j], yr[j]);
    else if (xa == 1 && yb == 0)
      for (int64_t j = 0; j < cols; ++j) orow[j] = f(xr[j], yr[0]);
    else if (xa == 0 && yb == 1)
      for (int64_t j = 0; j < cols; ++j) orow[j] = f(xr[0], yr[j]);
    else
      for (int64_t j = 0; j < cols; ++j) orow[j] = f(xr[j * xa], yr[j * yb]);
  }
}

// o = f(a) for a of out's shape, contiguous (copied first otherwise).
template <typename T, typename F>
void unary_loop(const Tensor& a_in, Tensor& out, F f) {
  const Tensor a = backend::contiguous(a_in);
  const T* x = a.data<T>();
  T* o = out.data<T>();
  const int64_t n = out.numel();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  detail::dispatch_float(out.dtype(), "binary op", [&](auto tag) {
    using T = decltype(tag);
    dispatch_binary(op, [&](auto o) {
      binary_loop<T>(a, b, out, [](T x, T y) { return binary_value<decltype(o)::value>(x, y); });
    });
  });
}

void unary(UnaryOp op, double s, const Tensor& a, Tensor& out) {
  detail::dispatch_float(out.dtype(), "unary op", [&](auto tag) {
    using T = decltype(tag);
    dispatch_unary(op, [&](auto o) {
      unary_loop<T>(a, out, [s](T x) { return unary_value<decltype(o)::value>(x, s); });
    });
  });
}

void unary_grad(UnaryOp op, double s, const Tensor& g, const Tensor& v, Tensor& out) {
  detail::dispatch_float(out.dtype(), "unary backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_unary(op, [&](auto o) {
      constexpr UnaryOp kOp = decltype(o)::value;
      if constexpr (std::is_same_v<T, float>) {
        // An input kept as bf16 (GELU's under bf16 products): widened as it is read (exact),
        // instead of through an f32 copy of it.
        if (v.defined() && v.dtype() == DType::BF16) {
          LB_CHECK(v.shape() == out.shape() && g.shape() == out.shape(), "internal: unary backward shapes");
          const Tensor gc = backend::contiguous(g), vc = backend::contiguous(v);
          const float* gp = gc.data<float>();
          const uint16_t* vp = static_cast<const uint16_t*>(vc.raw_data());
          float* op = out.data<float>();
          const int64_t n = out.numel();
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
          for (int64_t i = 0; i < n; ++i) {
            const uint32_t u = static_cast<uint32_t>(vp[i]) << 16;
            float x;
            std::memcpy(&x, &u, sizeof x);
            op[i] = gp[i] * unary_derivative<kOp>(x, s);
          }
          return;
        }
      }
      if (!v.defined()) {
        const T d = unary_derivative<kOp>(T(0), s);
        unary_loop<T>(g, out, [d](T gg) { return gg * d; });
      } else {
        binary_loop<T>(backend::contiguous(g), backend::contiguous(v), out,
                       [s](T gg, T x) { return gg * unary_derivative<kOp>(x, s); });
      }
    });
  });
}

void add_scaled_(Tensor& dst, const Tensor& src, double alpha) {
  detail::dispatch_float(dst.dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    const T al = static_cast<T>(alpha);
    if (dst.is_contiguous() && src.is_contiguous() && src.shape() == dst.shape()) {
      T* d = dst.data<T>();
      const T* s = src.data<T>();
      const int64_t n = dst.numel();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
      for (int64_t i = 0; i < n; ++i) d[i] += al * s[i];
    } else {
      Tensor tmp = Tensor::empty(dst.shape(), dst.dtype(), dst.device());
      binary_loop<T>(dst, src, tmp, [al](T x, T y) { return x + al * y; });
      dst.copy_(tmp);
    }
  });
}

void scale_(Tensor& dst, double s) {
  detail::dispatch_float(dst.dtype(), "mul_scalar_", [&](auto tag) {
    using T = decltype(tag);
    if (dst.is_contiguous()) {
      T* d = dst.data<T>();
      const int64_t n = dst.numel();
      const T sc = static_cast<T>(s);
#pragma omp parallel for if (n > kParallelMin) schedule(static)
      for (int64_t i = 0; i < n; ++i) d[i] *= sc;
    } else {
      Tensor tmp = Tensor::empty(dst.shape(), dst.dtype(), dst.device());
      unary_loop<T>(dst, tmp, [s](T x) { return static_cast<T>(x * s); });
      dst.copy_(tmp);
    }
  });
}

}  // namespace

const ElementwiseKernels kCpuElementwise{binary, unary, unary_grad, add_scaled_, scale_};

}  // namespace lb::backend
