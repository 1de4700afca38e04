// Exact lean: keep the producer's tensors instead of x where they give x back (kept_input.h).
#include "lb/autograd/kept_input.h"

namespace lb::autograd {

Node::OutputRecipe recipe_of(const Tensor& x) {
  if (!x.grad_fn() || !x.grad_fn()->output_recipe().fn || !x.is_contiguous() || x.offset() != 0) return {};
  return x.grad_fn()->output_recipe();
}

KeptInput keep_input(const Tensor& x, const Tensor& kept) {
  KeptInput k{{kept}, nullptr};
  // x must be the producer's output itself (not a view of it) and kept must be x as it is.
  const bool as_is = kept.defined() && kept.storage() == x.storage() && kept.offset() == x.offset() &&
                     kept.dtype() == x.dtype() && x.is_contiguous() && x.offset() == 0;
  if (!as_is || !x.grad_fn() || !x.grad_fn()->output_recipe().fn) return k;
  k.tensors = x.grad_fn()->output_recipe().kept;
  k.recompute = x.grad_fn()->output_recipe().fn;
  return k;
}

}  // namespace lb::autograd
