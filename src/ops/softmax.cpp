// softmax / log_softmax along one axis with an optional additive mask, forward and backward.
// The kernels (src/backend/softmax.h) work on contiguous rows, the axis last; another axis is
// moved last by a transposed view (a copy; attention never needs it).
//
// Masked rows: entries with mask = -inf get probability exactly 0 (no NaN) as long as one
// entry of the row is finite. A row with every entry -inf (a fully padded query) gives
// softmax 0 everywhere and log_softmax -inf everywhere, both with zero gradient — PyTorch
// gives NaN there; zeros keep a training run alive (FlashAttention does the same).
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/elementwise.h"
#include "lb/ops/nn.h"
#include "lb/ops/reduce.h"
#include "src/backend/copy.h"
#include "src/backend/softmax.h"

namespace lb {

namespace {

template <bool kLog>
Tensor softmax_impl(const Tensor& x, int64_t dim, const Tensor& mask) {
  const char* op = kLog ? "log_softmax" : "softmax";
  detail::check_defined(x, op, "x");
  detail::check_floating(x, op);
  LB_CHECK(x.dim() >= 1, op, ": needs at least 1 dimension, got a 0-d tensor ", x.str());
  dim = normalize_dim(dim, x.dim());
  if (mask.defined()) {
    detail::check_same_device(x, mask, op);
    LB_CHECK(mask.dtype() == x.dtype(), op, ": the additive mask must have x's dtype ",
             dtype_name(x.dtype()), ", got ", dtype_name(mask.dtype()), " ",
             shape_str(mask.shape()),
             ". HINT: build it as (1 - keep) * -1e4 (or -inf) in x's dtype, not as a bool tensor");
    bool fits = mask.dim() <= x.dim();
    for (int64_t i = 1; fits && i <= mask.dim(); ++i)
      fits = mask.size(-i) == 1 || mask.size(-i) == x.size(-i);
    LB_CHECK(fits, op, ": mask ", shape_str(mask.shape()), " does not broadcast to x ",
             shape_str(x.shape()), ". HINT: a key-padding mask for (B, H, T, T) scores is (B, 1, 1, T)");
  }
  if (dim != x.dim() - 1) {
    // Move the axis last (views, differentiable), run, move it back into a contiguous result.
    const Tensor xt = x.transpose(dim, -1);
    const Tensor mt = mask.defined() ? mask.expand(x.shape()).transpose(dim, -1) : Tensor();
    return softmax_impl<kLog>(xt, -1, mt).transpose(dim, -1).contiguous();
  }

  const Tensor xc = backend::contiguous(x);
  const Shape& shape = x.shape();
  const Shape ms = mask.defined() ? detail::broadcast_strides(mask, shape) : Shape();
  Tensor y = Tensor::empty(shape, x.dtype(), x.device());
  backend::softmax_kernels(x.device()).forward(xc, mask, ms, y, kLog);

  if (autograd::should_record({x, mask})) {
    const Shape mask_shape = mask.defined() ? mask.shape() : Shape();
    // Only the output is saved: both gradients are functions of y and g.
    autograd::record(op, y, {x, mask}, {y.detach()},
                     [mask_shape](const Tensor& g, const std::vector<Tensor>& s,
                                           const std::vector<bool>& need) {
                       const Tensor gc = backend::contiguous(g);
                       Tensor dz = Tensor::empty(gc.shape(), gc.dtype(), gc.device());
                       backend::softmax_kernels(gc.device()).backward(gc, s[0], dz, kLog);
                       // The mask enters as x + mask, so its gradient is dz summed over
                       // its broadcast axes.
                       return std::vector<Tensor>{need[0] ? dz : Tensor(),
                                                  need[1] ? sum_to(dz, mask_shape) : Tensor()};
                     });
  }
  return y;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, const Tensor& mask) {
  return softmax_impl<false>(x, dim, mask);
}

Tensor log_softmax(const Tensor& x, int64_t dim, const Tensor& mask) {
  return softmax_impl<true>(x, dim, mask);
}

}  // namespace lb
