// layer_norm over the last dim C of x viewed as (R, C) rows (R = B*T for (B, T, C)), forward
// and backward (kernels: src/backend/layer_norm.h). As PyTorch, the forward saves x plus one
// mean and one rstd per row (2R values), never x̂ or y; backward recomputes x̂ row by row, and
// a consumer that needs y recomputes it from the same tensors (the node's output recipe).
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/nn.h"
#include "src/backend/copy.h"
#include "src/backend/layer_norm.h"

namespace lb {

namespace {

void check_param(const Tensor& p, const Tensor& x, int64_t C, const char* name) {
  if (!p.defined()) return;
  detail::check_same_device(x, p, "layer_norm");
  LB_CHECK(p.dim() == 1 && p.size(0) == C, "layer_norm: ", name, " must have shape ",
           shape_str({C}), " to match the last dim of x ", shape_str(x.shape()), ", got ",
           shape_str(p.shape()));
  LB_CHECK(p.dtype() == x.dtype(), "layer_norm: ", name, " is ", dtype_name(p.dtype()),
           " but x is ", dtype_name(x.dtype()));
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_defined(x, "layer_norm", "x");
  detail::check_floating(x, "layer_norm");
  LB_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layer_norm: x must have a non-empty last dim, got ",
           shape_str(x.shape()));
  LB_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got ", eps);
  const int64_t C = x.size(-1);
  const int64_t R = x.numel() / C;
  check_param(weight, x, C, "weight");
  check_param(bias, x, C, "bias");
  const Tensor xc = backend::contiguous(x);
  const Tensor wc = weight.defined() ? backend::contiguous(weight) : Tensor();
  const Tensor bc = bias.defined() ? backend::contiguous(bias) : Tensor();
  const bool rec = autograd::should_record({x, weight, bias});
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean, rstd;
  if (rec) {
    mean = Tensor::empty({R}, x.dtype(), x.device());
    rstd = Tensor::empty({R}, x.dtype(), x.device());
  }
  backend::layer_norm_kernels(x.device()).forward(xc, wc, bc, y, mean, rstd, eps);
  if (rec) {
    // Saved: x (as given: a view keeps its storage, backward makes it contiguous), weight
    // (a parameter, not counted as activation memory), mean and rstd (R values each), and
    // bias, which backward does not read but the output recipe below does.
    autograd::record(
        "layer_norm", y, {x, weight, bias}, {x, weight, mean, rstd, bias},
        [C](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
          const Tensor gc = backend::contiguous(g);
          const Tensor xs = backend::contiguous(s[0]);
          const Tensor ws = s[1].defined() ? backend::contiguous(s[1]) : Tensor();
          Tensor dx, dw, db;
          if (need[0]) dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
          if (need[1]) dw = Tensor::empty({C}, xs.dtype(), xs.device());
          if (need[2]) db = Tensor::empty({C}, xs.dtype(), xs.device());
          backend::layer_norm_kernels(xs.device()).backward(gc, xs, ws, s[2], s[3], dx, dw, db);
          return std::vector<Tensor>{dx, dw, db};
        });
    // The output again from what the node keeps, bit for bit: the forward kernel on the same
    // x, weight and bias (each row's mean and rstd are recomputed by the same loop). A Linear
    // that consumes y keeps these instead of y (lb/nn/backward/strategy.cpp).
    y.grad_fn()->set_output_recipe([eps](const std::vector<Tensor>& kept) {
      const Tensor xs = backend::contiguous(kept[0]);
      const Tensor ws = kept[1].defined() ? backend::contiguous(kept[1]) : Tensor();
      const Tensor bs = kept[4].defined() ? backend::contiguous(kept[4]) : Tensor();
      Tensor out = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
      Tensor no_mean, no_rstd;
      backend::layer_norm_kernels(xs.device()).forward(xs, ws, bs, out, no_mean, no_rstd, eps);
      return out;
    });
  }
  return y;
}

}  // namespace lb
