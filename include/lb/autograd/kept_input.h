// Exact lean: an op that would keep its input x for backward, where x is the output of an op
// that can give x back from what that op keeps (Node::output_recipe: GELU, LayerNorm,
// attention), keeps the producer's saved tensors instead — already on the tape, so no new
// bytes — and recomputes x in backward, bit for bit. Used by linear and the strategies'
// Linear (lb/nn/backward/strategy.h).
#pragma once
#include <vector>

#include "lb/autograd/node.h"

namespace lb::autograd {

struct KeptInput {
  std::vector<Tensor> tensors;  // what to save: `kept` itself, or x's producer's saved tensors
  Node::Recompute recompute;    // null when tensors = {kept}
  // x (or `kept`) again from the saved tensors these became.
  Tensor get(const std::vector<Tensor>& saved) const { return recompute ? recompute(saved) : saved.at(0); }
};

// x's recipe where x is its producer's output as it is (contiguous, offset 0): what an op of x
// whose own output is a function of x alone (a view, a gather) builds its recipe on.
Node::OutputRecipe recipe_of(const Tensor& x);

// `kept` is what the op would save of x (x itself, or a bf16 copy); only x itself is replaced.
KeptInput keep_input(const Tensor& x, const Tensor& kept);

}  // namespace lb::autograd
