// Tensor's methods that record on the tape: deep copies and dtype conversion (differentiable)
// and backward().
#include "lb/autograd/grad_mode.h"
#include "lb/autograd/node.h"
#include "lb/core/tensor.h"

namespace lb {

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  if (autograd::should_record({*this}))
    autograd::record("clone", out, {*this}, {},
                     [](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
                       return std::vector<Tensor>{g};
                     });
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = empty(shape(), dt, device());
  out.copy_(*this);
  if (dtype_is_floating(dt) && dtype_is_floating(dtype()) && autograd::should_record({*this})) {
    const DType back = dtype();
    autograd::record("to_dtype", out, {*this}, {},
                     [back](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
                       return std::vector<Tensor>{g.to(back)};
                     });
  }
  return out;
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  autograd::run_backward(*this, grad_output, retain_graph);
}

}  // namespace lb
