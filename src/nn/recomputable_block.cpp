// Recomputable blocks (see recomputable_block.h).
#include "lb/nn/recomputable_block.h"

#include "lb/autograd/grad_mode.h"
#include "lb/autograd/module_scope.h"
#include "lb/autograd/recompute.h"

namespace lb::nn {

Tensor RecomputableBlock::run_block(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  const autograd::ModuleScope scope(path());
  if (!recompute_ || !autograd::grad_enabled()) return f(x);
  return autograd::recompute_in_backward(f, x, "recompute", recompute_bf16_);
}

}  // namespace lb::nn
