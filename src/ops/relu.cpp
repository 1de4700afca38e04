// relu(x) = max(x, 0) (x > 0 ? x : 0, so NaN maps to 0), differentiable. Backward needs only
// where x > 0, so the node saves that as a bit mask (1 bit per element, element i at bit
// i % 8 of byte i / 8, as dropout): 1/32 of the output in f32. Saving the output instead
// would keep it alive for the whole backward; in a conv net it is the next conv's input, which
// a compressing backward strategy (INSTANT, HOT) would otherwise free after the forward.
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/elementwise.h"
#include "src/backend/copy.h"
#include "src/backend/relu.h"

namespace lb {

namespace {
}  // namespace

Tensor relu(const Tensor& a) {
  detail::check_defined(a, "relu", "x");
  detail::check_floating(a, "relu");
  const Tensor x = backend::contiguous(a);
  const int64_t n = x.numel();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty({(n + 7) / 8}, DType::U8, x.device());
  backend::relu_kernels(x.device()).forward(x, y, mask);
  if (autograd::should_record({a})) {
    autograd::record("relu", y, {a}, {mask},
                     [](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
                       const Tensor gc = backend::contiguous(g);
                       Tensor dx = Tensor::empty(gc.shape(), gc.dtype(), gc.device());
                       backend::relu_kernels(gc.device()).backward(gc, s[0], dx);
                       return std::vector<Tensor>{dx};
                     });
  }
  return y;
}

}  // namespace lb
