// 2-D pooling on NCHW (f32/f64), forward and backward: the checks, geometry and autograd
// wiring; the kernels are per device (src/backend/pool2d.h). Semantics follow PyTorch's
// max_pool2d / avg_pool2d (ceil_mode=False, count_include_pad=True) and adaptive_avg_pool2d.
// Max pooling saves the argmax as its position inside the window (u8 when the window has at
// most 256 cells, else the i32 plane index): a quarter of an f32 output, and x is not kept.
// The average pools save nothing.
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/conv.h"
#include "src/backend/copy.h"
#include "src/backend/pool2d.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;
using backend::AvgPool;
using backend::PoolGeom;

void check_pool_input(const Tensor& x, const char* op) {
  detail::check_defined(x, op, "x");
  detail::check_floating(x, op);
  LB_CHECK(x.dim() == 4, op, ": x must be (N, C, H, W), got ", shape_str(x.shape()));
}

PoolGeom pool_geom(const Tensor& x, const Pool2dArgs& a, const char* op) {
  check_pool_input(x, op);
  const auto& k = a.kernel;
  const auto& s = a.stride;
  const auto& pd = a.padding;
  LB_CHECK(k[0] > 0 && k[1] > 0, op, ": kernel must be positive, got (", k[0], ", ", k[1], ")");
  LB_CHECK(s[0] > 0 && s[1] > 0, op, ": stride must be positive, got (", s[0], ", ", s[1], ")");
  // PyTorch's rule; it also guarantees that every window overlaps the input.
  LB_CHECK(pd[0] >= 0 && pd[1] >= 0 && 2 * pd[0] <= k[0] && 2 * pd[1] <= k[1], op,
           ": padding (", pd[0], ", ", pd[1], ") must be non-negative and at most half the kernel (",
           k[0], ", ", k[1], ")");
  const int64_t H = x.size(2), W = x.size(3);
  LB_CHECK(H + 2 * pd[0] >= k[0] && W + 2 * pd[1] >= k[1], op, ": kernel (", k[0], ", ", k[1],
           ") is larger than the padded input (", H + 2 * pd[0], ", ", W + 2 * pd[1], ") of x ",
           shape_str(x.shape()), " with padding (", pd[0], ", ", pd[1], ")");
  return PoolGeom{x.size(0) * x.size(1), H, W, k[0], k[1], s[0], s[1], pd[0], pd[1],
                  (H + 2 * pd[0] - k[0]) / s[0] + 1, (W + 2 * pd[1] - k[1]) / s[1] + 1};
}

// Forward, then record a backward that needs only the geometry.
Tensor avg_pool_op(const Tensor& x, const PoolGeom& g, AvgPool mode, const char* name) {
  Tensor out = Tensor::empty({x.size(0), x.size(1), g.Ho, g.Wo}, x.dtype(), x.device());
  backend::pool2d_kernels(x.device()).avg_forward(g, mode, backend::contiguous(x), out);
  if (should_record({x})) {
    const Shape xs = x.shape();
    record(name, out, {x}, {},
           [g, mode, xs](const Tensor& dy, const std::vector<Tensor>&, const std::vector<bool>&) {
             Tensor dx = Tensor::empty(xs, dy.dtype(), dy.device());
             backend::pool2d_kernels(dy.device()).avg_backward(g, mode, backend::contiguous(dy), dx);
             return std::vector<Tensor>{dx};
           });
  }
  return out;
}
}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dArgs& args) {
  const PoolGeom g = pool_geom(x, args, "max_pool2d");
  const Shape os = {x.size(0), x.size(1), g.Ho, g.Wo};
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  const DType idx_dtype = g.kH * g.kW <= 256 ? DType::U8 : DType::I32;
  Tensor idx = Tensor::empty(os, idx_dtype, x.device());
  backend::pool2d_kernels(x.device()).max_forward(g, backend::contiguous(x), out, idx);
  if (should_record({x})) {
    const Shape xs = x.shape();
    record("max_pool2d", out, {x}, {idx},
           [g, xs](const Tensor& dy, const std::vector<Tensor>& s, const std::vector<bool>&) {
             Tensor dx = Tensor::empty(xs, dy.dtype(), dy.device());
             backend::pool2d_kernels(dy.device()).max_backward(g, backend::contiguous(dy), s[0], dx);
             return std::vector<Tensor>{dx};
           });
  }
  return out;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dArgs& args) {
  return avg_pool_op(x, pool_geom(x, args, "avg_pool2d"), AvgPool::kFixed, "avg_pool2d");
}

Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w) {
  check_pool_input(x, "adaptive_avg_pool2d");
  LB_CHECK(out_h > 0 && out_w > 0, "adaptive_avg_pool2d: output size must be positive, got (",
           out_h, ", ", out_w, ") for x ", shape_str(x.shape()));
  const int64_t H = x.size(2), W = x.size(3);
  LB_CHECK(H > 0 && W > 0, "adaptive_avg_pool2d: x ", shape_str(x.shape()),
           " has an empty plane");
  const PoolGeom g{x.size(0) * x.size(1), H, W, 0, 0, 0, 0, 0, 0, out_h, out_w};
  return avg_pool_op(x, g, AvgPool::kAdaptive, "adaptive_avg_pool2d");
}

}  // namespace lb
