// conv2d on NCHW (f32/f64): the checks and the autograd wiring; the kernels are per device
// (src/backend/conv2d.h: im2col + GEMM or Winograd on the CPU, im2col + cuBLAS on CUDA).
// Backward splits into a data part (grad_input = col2im(Wᵀ · grad_output)) and a filter
// part (grad_weight = grad_output · colsᵀ, grad_bias = Σ grad_output). Only x and w are
// saved, each only when the other's gradient is wanted; the column matrix is rebuilt from x
// in backward (it is kH·kW times larger than x).
#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/ops/conv.h"
#include "src/backend/conv2d.h"
#include "src/backend/copy.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;

void check_conv_args(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args) {
  const char* op = "conv2d";
  detail::check_defined(x, op, "x");
  detail::check_defined(w, op, "w");
  detail::check_same_device(x, w, op);
  detail::check_floating(x, op);
  detail::check_same_dtype(x, w, op);
  LB_CHECK(x.dim() == 4, op, ": x must be (N, C_in, H, W), got ", shape_str(x.shape()));
  LB_CHECK(w.dim() == 4, op, ": w must be (C_out, C_in/groups, kH, kW), got ",
           shape_str(w.shape()));
  LB_CHECK(args.groups > 0, op, ": groups must be positive, got ", args.groups);
  const int64_t C = x.size(1), Co = w.size(0);
  LB_CHECK(C > 0 && Co > 0 && w.size(2) > 0 && w.size(3) > 0, op,
           ": empty channel or kernel dimension, x ", shape_str(x.shape()), ", w ",
           shape_str(w.shape()));
  LB_CHECK(C % args.groups == 0 && Co % args.groups == 0, op, ": groups = ", args.groups,
           " must divide both C_in = ", C, " (x ", shape_str(x.shape()), ") and C_out = ", Co,
           " (w ", shape_str(w.shape()), ")");
  LB_CHECK(w.size(1) * args.groups == C, op, ": channel mismatch, x ", shape_str(x.shape()),
           " has C_in = ", C, " but w ", shape_str(w.shape()), " with groups = ", args.groups,
           " expects C_in = ", w.size(1) * args.groups);
  if (b.defined()) {
    detail::check_same_device(x, b, op);
    detail::check_same_dtype(x, b, op);
    LB_CHECK(b.dim() == 1 && b.size(0) == Co, op, ": bias must be (", Co, ") for w ",
             shape_str(w.shape()), ", got ", shape_str(b.shape()));
  }
}

// The op's backward: x is read only for dw, w only for dx (either may be undefined when its
// gradient is not wanted).
Conv2dGrads conv2d_grads_impl(const Conv2dArgs& args, const detail::ConvGeom& geom, const Shape& xs,
                              const Shape& ws, const Tensor& g, const Tensor& x, const Tensor& w, bool want_x,
                              bool want_w, bool want_b) {
  Conv2dGrads r;
  if (want_x) r.grad_input = Tensor::empty(xs, g.dtype(), g.device());
  if (want_w) r.grad_weight = Tensor::empty(ws, g.dtype(), g.device());
  if (want_b) r.grad_bias = Tensor::empty({ws[0]}, g.dtype(), g.device());
  const Tensor xc = want_w ? backend::contiguous(x) : Tensor();
  const Tensor wc = want_x ? backend::contiguous(w) : Tensor();
  backend::conv2d_kernels(g.device())
      .backward(backend::contiguous(g), xc, wc, xs, ws, args, geom, r.grad_input, r.grad_weight, r.grad_bias);
  return r;
}

detail::ConvGeom geometry(const Tensor& x, const Tensor& w, const Conv2dArgs& args) {
  return detail::conv_geom(x.size(2), x.size(3), w.size(2), w.size(3), args, "conv2d");
}
}  // namespace

Conv2dGrads conv2d_grads(const Tensor& grad_output, const Tensor& x, const Tensor& w,
                         const Conv2dArgs& args, bool want_input, bool want_weight,
                         bool want_bias) {
  check_conv_args(x, w, Tensor(), args);
  const detail::ConvGeom geom = geometry(x, w, args);
  const Shape ys{x.size(0), w.size(0), geom.Ho, geom.Wo};
  detail::check_defined(grad_output, "conv2d_grads", "grad_output");
  LB_CHECK(grad_output.shape() == ys && grad_output.dtype() == x.dtype(),
           "conv2d_grads: grad_output must be ", shape_str(ys), " ", dtype_name(x.dtype()),
           " for x ", shape_str(x.shape()), " and w ", shape_str(w.shape()), ", got ",
           shape_str(grad_output.shape()), " ", dtype_name(grad_output.dtype()));
  NoGradGuard no_grad;
  return conv2d_grads_impl(args, geom, x.shape(), w.shape(), grad_output, x, w, want_input, want_weight,
                           want_bias);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args) {
  check_conv_args(x, w, b, args);
  const detail::ConvGeom geom = geometry(x, w, args);
  Tensor out = Tensor::empty({x.size(0), w.size(0), geom.Ho, geom.Wo}, x.dtype(), x.device());
  backend::conv2d_kernels(x.device())
      .forward(backend::contiguous(x), backend::contiguous(w), b.defined() ? backend::contiguous(b) : Tensor(), args,
               geom, out);
  if (should_record({x, w, b})) {
    // dx needs w, dw needs x, db needs neither: save only what the wanted gradients use.
    const bool want_x = x.requires_grad(), want_w = w.requires_grad();
    const Shape xs = x.shape(), ws = w.shape();
    // (x as bf16 under bf16 products: lb/autograd/saved_operand.h)
    record("conv2d", out, {x, w, b},
           {want_w ? autograd::keep_product_operand(x) : Tensor(), want_x ? w : Tensor()},
           [args, geom, xs, ws](const Tensor& g, const std::vector<Tensor>& s,
                                const std::vector<bool>& need) {
             const Conv2dGrads gr = conv2d_grads_impl(args, geom, xs, ws, g, autograd::saved_f32(s[0]),
                                                      s[1], need[0], need[1], need[2]);
             return std::vector<Tensor>{gr.grad_input, gr.grad_weight, gr.grad_bias};
           });
  }
  return out;
}

}  // namespace lb
