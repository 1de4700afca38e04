// Elementwise ops with broadcasting, forward and backward side by side: checks, output
// allocation and autograd wiring here, for every device; the loops are the device's kernels
// (src/backend/elementwise.h: src/cpu/elementwise.cpp, cuda/elementwise.cu).
#include "lb/ops/elementwise.h"

#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/ops/reduce.h"
#include "src/backend/elementwise.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;
using backend::BinaryOp;
using backend::DerivativeOf;
using backend::UnaryOp;

const backend::ElementwiseKernels& kernels(const Tensor& t) { return backend::elementwise_kernels(t.device()); }

void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  detail::check_defined(a, op, "a");
  detail::check_defined(b, op, "b");
  detail::check_same_device(a, b, op);
  detail::check_same_dtype(a, b, op);
  detail::check_floating(a, op);
}
void check_unary(const Tensor& a, const char* op) {
  detail::check_defined(a, op, "x");
  detail::check_floating(a, op);
}

Tensor binary_forward(const Tensor& a, const Tensor& b, BinaryOp op) {
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape()), a.dtype(), a.device());
  kernels(a).binary(op, a, b, out);
  return out;
}

// Unary op whose backward multiplies the gradient by op'(saved): the input or the output
// (backend::derivative_of), or a constant. kept_rounded: the input is kept as bf16 under
// bf16 products (lb/autograd/saved_operand.h).
Tensor unary_op(const Tensor& a, const char* name, UnaryOp op, double s = 0.0, bool kept_rounded = false) {
  check_unary(a, name);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  kernels(a).unary(op, s, a, out);
  if (should_record({a})) {
    const DerivativeOf of = backend::derivative_of(op);
    const Tensor saved = of == DerivativeOf::Input    ? (kept_rounded ? autograd::keep_rounded_activation(a) : a)
                         : of == DerivativeOf::Output ? out.detach()
                                                      : Tensor();
    record(name, out, {a}, {saved}, [op, s](const Tensor& g, std::vector<Tensor>& saved, const std::vector<bool>&) {
      // A bf16 input is read as it is by the CPU kernel (widened exactly as it goes).
      Tensor v = std::move(saved[0]);
      if (v.defined() && !v.device().is_cpu()) v = autograd::saved_f32(v);
      // A copy only this backward holds (a kept tensor decoded for it, saved_codec.h: no
      // other handle, no other view) takes the gradient in place, element by element: one
      // activation-sized tensor fewer. The node's own kept tensor is never written.
      const bool own = v.defined() && v.impl_ptr().use_count() == 1 && v.storage().use_count() == 1 &&
                       v.is_contiguous() && v.offset() == 0 && v.dtype() == g.dtype() && v.shape() == g.shape() &&
                       v.device() == g.device();
      Tensor r = own ? v : Tensor::empty(g.shape(), g.dtype(), g.device());
      kernels(g).unary_grad(op, s, g, v, r);
      return std::vector<Tensor>{r};
    });
    // Kept as it is (not a rounded copy), the input gives the output again exactly.
    if (of == DerivativeOf::Input && saved.defined() && saved.storage() == a.storage())
      out.grad_fn()->set_output_recipe([op, s](const std::vector<Tensor>& kept) {
        Tensor r = Tensor::empty(kept[0].shape(), kept[0].dtype(), kept[0].device());
        kernels(kept[0]).unary(op, s, kept[0], r);
        return r;
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
  Tensor out = binary_forward(a, b, BinaryOp::Add);
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
  Tensor out = binary_forward(a, b, BinaryOp::Sub);
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
  Tensor out = binary_forward(a, b, BinaryOp::Mul);
  if (should_record({a, b})) {
    const bool na = a.requires_grad(), nb = b.requires_grad();
    // Save only what the needed gradients use: d(ab)/da = b, d(ab)/db = a.
    const Shape sa = a.shape(), sb = b.shape();
    record("mul", out, {a, b}, {nb ? a : Tensor(), na ? b : Tensor()},
           [sa, sb](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
             return std::vector<Tensor>{
                 need[0] ? sum_to(binary_forward(g, s[1], BinaryOp::Mul), sa) : Tensor(),
                 need[1] ? sum_to(binary_forward(g, s[0], BinaryOp::Mul), sb) : Tensor()};
           });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "div");
  Tensor out = binary_forward(a, b, BinaryOp::Div);
  if (should_record({a, b})) {
    const Shape sa = a.shape(), sb = b.shape();
    const bool nb = b.requires_grad();
    // d(a/b)/da = 1/b; d(a/b)/db = -a/b² = -out/b.
    record("div", out, {a, b}, {b, nb ? out.detach() : Tensor()},
           [sa, sb](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
             Tensor ga, gb;
             const Tensor gdb = binary_forward(g, s[0], BinaryOp::Div);
             if (need[0]) ga = sum_to(gdb, sa);
             if (need[1]) gb = neg(sum_to(binary_forward(gdb, s[1], BinaryOp::Mul), sb));
             return std::vector<Tensor>{ga, gb};
           });
  }
  return out;
}

Tensor add_scalar(const Tensor& a, double s) { return unary_op(a, "add_scalar", UnaryOp::AddScalar, s); }
Tensor mul_scalar(const Tensor& a, double s) { return unary_op(a, "mul_scalar", UnaryOp::MulScalar, s); }
Tensor rsub_scalar(const Tensor& a, double s) { return unary_op(a, "rsub_scalar", UnaryOp::RsubScalar, s); }
Tensor pow_scalar(const Tensor& a, double p) { return unary_op(a, "pow_scalar", UnaryOp::PowScalar, p); }
Tensor neg(const Tensor& a) { return unary_op(a, "neg", UnaryOp::Neg); }
Tensor exp(const Tensor& a) { return unary_op(a, "exp", UnaryOp::Exp); }
Tensor log(const Tensor& a) { return unary_op(a, "log", UnaryOp::Log); }
Tensor sqrt(const Tensor& a) { return unary_op(a, "sqrt", UnaryOp::Sqrt); }
Tensor rsqrt(const Tensor& a) { return unary_op(a, "rsqrt", UnaryOp::Rsqrt); }
Tensor tanh(const Tensor& a) { return unary_op(a, "tanh", UnaryOp::Tanh); }
Tensor sigmoid(const Tensor& a) { return unary_op(a, "sigmoid", UnaryOp::Sigmoid); }
// relu: src/ops/relu.cpp (saves a bit mask, not the output).

// GELU keeps its input, as bf16 under bf16 products (its derivative moves by <= 1.3e-3).
Tensor gelu(const Tensor& a, GeluApprox approx) {
  return approx == GeluApprox::None ? unary_op(a, "gelu", UnaryOp::Gelu, 0.0, true)
                                    : unary_op(a, "gelu_tanh", UnaryOp::GeluTanh, 0.0, true);
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_binary(dst, src, "add_");
  LB_CHECK(broadcast_shapes(dst.shape(), src.shape()) == dst.shape(), "add_: cannot broadcast ",
           shape_str(src.shape()), " into ", shape_str(dst.shape()));
  kernels(dst).add_scaled_(dst, src, alpha);
}

void mul_scalar_(Tensor& dst, double s) {
  check_unary(dst, "mul_scalar_");
  kernels(dst).scale_(dst, s);
}

}  // namespace lb
