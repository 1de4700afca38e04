// Elementwise ops with broadcasting, forward and backward side by side. Fast path: equal
// shapes, contiguous; general path: broadcast strides walked row by row (last axis inner),
// rows split across OpenMP threads when the tensor is large.
#include "lb/ops/elementwise.h"

#include <cmath>
#include <type_traits>

#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/reduce.h"
#include "src/ops/gelu_f32.h"

namespace lb {

namespace detail {
Tensor contiguous_nograd(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  out.copy_(t);
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size()), td = t.dim();
  Shape st(nd, 0);
  for (int64_t i = 0; i < td; ++i) {
    const int64_t j = nd - td + i;
    if (t.shape()[i] != 1) st[j] = t.strides()[i];
  }
  return st;
}
}  // namespace detail

namespace {
constexpr int64_t kParallelMin = 1 << 15;

using autograd::record;
using autograd::should_record;
using detail::broadcast_strides;
using detail::contiguous_nograd;

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

template <typename T, typename F>
Tensor binary_apply(const Tensor& a, const Tensor& b, F f) {
  const Shape os = broadcast_shapes(a.shape(), b.shape());
  Tensor out = Tensor::empty(os, a.dtype(), a.device());
  T* o = out.data<T>();
  const int64_t n = out.numel();
  if (a.shape() == os && b.shape() == os && a.is_contiguous() && b.is_contiguous()) {
    const T* x = a.data<T>();
    const T* y = b.data<T>();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    return out;
  }
  const Shape sa = broadcast_strides(a, os), sb = broadcast_strides(b, os);
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
  return out;
}

template <typename T, typename F>
Tensor unary_apply(const Tensor& a, F f) {
  Tensor ac = contiguous_nograd(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  const T* x = ac.data<T>();
  T* o = out.data<T>();
  const int64_t n = out.numel();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
  return out;
}

// out[i] = f(g[i], s[i]) for two same-shape tensors (backward of unary ops).
template <typename T, typename F>
Tensor unary_backward(const Tensor& g, const Tensor& s, F f) {
  return binary_apply<T>(contiguous_nograd(g), contiguous_nograd(s), f);
}

void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  detail::check_defined(a, op, "a");
  detail::check_defined(b, op, "b");
  detail::check_same_device(a, b, op);
  detail::check_cpu(a, op);
  detail::check_same_dtype(a, b, op);
  detail::check_floating(a, op);
}
void check_unary(const Tensor& a, const char* op) {
  detail::check_defined(a, op, "x");
  detail::check_cpu(a, op);
  detail::check_floating(a, op);
}

enum class BinOp { Add, Sub, Mul, Div };

Tensor binary_forward(const Tensor& a, const Tensor& b, BinOp op) {
  Tensor out;
  detail::dispatch_float(a.dtype(), "binary op", [&](auto tag_) { using T = decltype(tag_);
    switch (op) {
      case BinOp::Add: out = binary_apply<T>(a, b, [](T x, T y) { return x + y; }); break;
      case BinOp::Sub: out = binary_apply<T>(a, b, [](T x, T y) { return x - y; }); break;
      case BinOp::Mul: out = binary_apply<T>(a, b, [](T x, T y) { return x * y; }); break;
      case BinOp::Div: out = binary_apply<T>(a, b, [](T x, T y) { return x / y; }); break;
    }
  });
  return out;
}

// Unary op with a backward that needs the saved input (kind=Input) or output (kind=Output):
// grad_in = g * deriv(saved). Constant derivatives (kind=Nothing) save nothing. RoundedInput:
// the input, kept as bf16 under bf16 products (lb/autograd/saved_operand.h).
enum class SaveKind { Input, RoundedInput, Output, Nothing };
template <typename Fwd, typename Deriv>
Tensor unary_op(const Tensor& a, const char* name, SaveKind kind, Fwd fwd, Deriv deriv) {
  check_unary(a, name);
  Tensor out;
  detail::dispatch_float(a.dtype(), name, [&](auto tag_) { using T = decltype(tag_); out = unary_apply<T>(a, [&](T x) { return static_cast<T>(fwd(x)); }); });
  if (should_record({a})) {
    const Tensor saved = kind == SaveKind::Input          ? a
                         : kind == SaveKind::RoundedInput ? autograd::keep_rounded_activation(a)
                         : kind == SaveKind::Output       ? out.detach()
                                                          : Tensor();
    record(name, out, {a}, {saved},
           [deriv](const Tensor& g, const std::vector<Tensor>& saved, const std::vector<bool>&) {
             const std::vector<Tensor> s{autograd::saved_f32(saved[0])};
             Tensor r;
             detail::dispatch_float(g.dtype(), "unary backward", [&](auto tag_) { using T = decltype(tag_);
               if (!s[0].defined()) {
                 const T d = static_cast<T>(deriv(T(0)));
                 r = unary_apply<T>(g, [d](T gg) { return gg * d; });
               } else {
                 // The derivative rounded to T first: the multiply stays in T and vectorizes
                 // (deriv often returns double for a float argument).
                 r = unary_backward<T>(g, s[0], [&](T gg, T v) { return gg * static_cast<T>(deriv(v)); });
               }
             });
             return std::vector<Tensor>{r};
           });
  }
  return out;
}
}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LB_CHECK(da == db || da == 1 || db == 1, "shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "add");
  Tensor out = binary_forward(a, b, BinOp::Add);
  if (should_record({a, b})) {
    const Shape sa = a.shape(), sb = b.shape();
    record("add", out, {a, b}, {},
           [sa, sb](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>& need) {
             return std::vector<Tensor>{need[0] ? sum_to(g, sa) : Tensor(),
                                        need[1] ? sum_to(g, sb) : Tensor()};
           });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "sub");
  Tensor out = binary_forward(a, b, BinOp::Sub);
  if (should_record({a, b})) {
    const Shape sa = a.shape(), sb = b.shape();
    record("sub", out, {a, b}, {},
           [sa, sb](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>& need) {
             return std::vector<Tensor>{need[0] ? sum_to(g, sa) : Tensor(),
                                        need[1] ? neg(sum_to(g, sb)) : Tensor()};
           });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "mul");
  Tensor out = binary_forward(a, b, BinOp::Mul);
  if (should_record({a, b})) {
    const bool na = a.requires_grad(), nb = b.requires_grad();
    // Save only what the needed gradients use: d(ab)/da = b, d(ab)/db = a.
    const Shape sa = a.shape(), sb = b.shape();
    record("mul", out, {a, b}, {nb ? a : Tensor(), na ? b : Tensor()},
           [sa, sb](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
             return std::vector<Tensor>{
                 need[0] ? sum_to(binary_forward(g, s[1], BinOp::Mul), sa) : Tensor(),
                 need[1] ? sum_to(binary_forward(g, s[0], BinOp::Mul), sb) : Tensor()};
           });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "div");
  Tensor out = binary_forward(a, b, BinOp::Div);
  if (should_record({a, b})) {
    const Shape sa = a.shape(), sb = b.shape();
    const bool nb = b.requires_grad();
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b² = -out/b.
    record("div", out, {a, b}, {b, nb ? out.detach() : Tensor()},
           [sa, sb](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
             Tensor ga, gb;
             const Tensor gdb = binary_forward(g, s[0], BinOp::Div);
             if (need[0]) ga = sum_to(gdb, sa);
             if (need[1]) gb = neg(sum_to(binary_forward(gdb, s[1], BinOp::Mul), sb));
             return std::vector<Tensor>{ga, gb};
           });
  }
  return out;
}

Tensor add_scalar(const Tensor& a, double s) {
  return unary_op(a, "add_scalar", SaveKind::Nothing, [s](auto x) { return x + s; },
                  [](auto) { return 1.0; });
}
Tensor mul_scalar(const Tensor& a, double s) {
  return unary_op(a, "mul_scalar", SaveKind::Nothing, [s](auto x) { return x * s; },
                  [s](auto) { return s; });
}
Tensor rsub_scalar(const Tensor& a, double s) {
  return unary_op(a, "rsub_scalar", SaveKind::Nothing, [s](auto x) { return s - x; },
                  [](auto) { return -1.0; });
}
Tensor pow_scalar(const Tensor& a, double p) {
  return unary_op(a, "pow_scalar", SaveKind::Input, [p](auto x) { return std::pow(x, p); },
                  [p](auto x) { return p * std::pow(x, p - 1); });
}
Tensor neg(const Tensor& a) {
  return unary_op(a, "neg", SaveKind::Nothing, [](auto x) { return -x; },
                  [](auto) { return -1.0; });
}
Tensor exp(const Tensor& a) {
  return unary_op(a, "exp", SaveKind::Output, [](auto x) { return std::exp(x); },
                  [](auto y) { return y; });
}
Tensor log(const Tensor& a) {
  return unary_op(a, "log", SaveKind::Input, [](auto x) { return std::log(x); },
                  [](auto x) { return 1.0 / x; });
}
Tensor sqrt(const Tensor& a) {
  return unary_op(a, "sqrt", SaveKind::Output, [](auto x) { return std::sqrt(x); },
                  [](auto y) { return 0.5 / y; });
}
Tensor rsqrt(const Tensor& a) {
  return unary_op(a, "rsqrt", SaveKind::Output, [](auto x) { return 1.0 / std::sqrt(x); },
                  [](auto y) { return -0.5 * y * y * y; });
}
Tensor tanh(const Tensor& a) {
  return unary_op(a, "tanh", SaveKind::Output, [](auto x) { return std::tanh(x); },
                  [](auto y) { return 1.0 - y * y; });
}
Tensor sigmoid(const Tensor& a) {
  return unary_op(a, "sigmoid", SaveKind::Output,
                  [](auto x) { return 1.0 / (1.0 + std::exp(-x)); },
                  [](auto y) { return y * (1.0 - y); });
}
// relu: src/ops/relu.cpp (saves a bit mask, not the output).

Tensor gelu(const Tensor& a, GeluApprox approx) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  // f32 uses the vectorizable formulas of gelu_f32.h (libm's erf/tanh are scalar calls and
  // took most of GELU's time); f64 (gradient checks) keeps libm.
  if (approx == GeluApprox::None)
    // gelu(x) = x Φ(x); gelu'(x) = Φ(x) + x φ(x).
    return unary_op(a, "gelu", SaveKind::RoundedInput,
                    [](auto x) {
                      if constexpr (std::is_same_v<decltype(x), float>) return detail::gelu_f32(x);
                      else return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
                    },
                    [](auto x) {
                      if constexpr (std::is_same_v<decltype(x), float>) {
                        return detail::gelu_grad_f32(x);
                      } else {
                        return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) +
                               x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
                      }
                    });
  // tanh form: 0.5 x (1 + tanh(u)), u = √(2/π)(x + 0.044715 x³).
  return unary_op(a, "gelu_tanh", SaveKind::RoundedInput,
                  [](auto x) {
                    if constexpr (std::is_same_v<decltype(x), float>) {
                      return detail::gelu_tanh_f32(x);
                    } else {
                      return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
                    }
                  },
                  [](auto x) {
                    if constexpr (std::is_same_v<decltype(x), float>) {
                      return detail::gelu_tanh_grad_f32(x);
                    } else {
                      const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
                      const double t = std::tanh(u);
                      const double du = kSqrt2OverPi * (1.0 + 3 * 0.044715 * x * x);
                      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
                    }
                  });
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_binary(dst, src, "add_");
  LB_CHECK(broadcast_shapes(dst.shape(), src.shape()) == dst.shape(), "add_: cannot broadcast ",
           shape_str(src.shape()), " into ", shape_str(dst.shape()));
  detail::dispatch_float(dst.dtype(), "add_", [&](auto tag_) { using T = decltype(tag_);
    const T al = static_cast<T>(alpha);
    if (dst.is_contiguous() && src.is_contiguous() && src.shape() == dst.shape()) {
      T* d = dst.data<T>();
      const T* s = src.data<T>();
      const int64_t n = dst.numel();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
      for (int64_t i = 0; i < n; ++i) d[i] += al * s[i];
    } else {
      Tensor tmp = binary_apply<T>(dst, src, [al](T x, T y) { return x + al * y; });
      dst.copy_(tmp);
    }
  });
}

void mul_scalar_(Tensor& dst, double s) {
  check_unary(dst, "mul_scalar_");
  detail::dispatch_float(dst.dtype(), "mul_scalar_", [&](auto tag_) { using T = decltype(tag_);
    if (dst.is_contiguous()) {
      T* d = dst.data<T>();
      const int64_t n = dst.numel();
      const T sc = static_cast<T>(s);
#pragma omp parallel for if (n > kParallelMin) schedule(static)
      for (int64_t i = 0; i < n; ++i) d[i] *= sc;
    } else {
      dst.copy_(unary_apply<T>(dst, [s](T x) { return static_cast<T>(x * s); }));
    }
  });
}

}  // namespace lb
