// Recomputation (activation checkpointing): a block keeps only its input for backward and runs
// its forward again when backward reaches it.
//
// recompute_in_backward(fn, x) computes y = fn(x) without recording anything, then records one
// node keeping x. Its backward sets the default generator (dropout's and attention's Philox
// stream) back to where it was when fn first ran, runs fn(x) again with recording on — the
// same kernels on the same values at the same random positions, so the same tensors — puts the
// generator back, and runs backward through that graph from the output gradient: parameters
// inside get their gradients as they would have, and x's gradient goes on to x's producer. The
// gradients equal those without recomputation bit for bit; the block's activations live only
// while its backward runs. `fn` must read no tensor that requires grad other than x and leaf
// tensors (parameters); what it captures must outlive the backward (capture by value).
//
// With bf16_products the recomputation runs fn's matrix products on bf16 operands (f32
// accumulation; lb/core/precision.h) where the CPU's bf16 kernel out-runs its f32 one: the
// second forward costs about two thirds of the first (ViT-tiny), and the activations
// backward reads differ from the first forward's by bf16 rounding — a lossy setting, like a
// bf16 codec on the block's tensors, which the memory planner weighs by its measured prior.
// What it keeps is as without (f32). Inside ExactRecomputeScope (the gradient probe's exact
// reference) every recomputation is exact again.
//
// x is kept as any op keeps its input (kept_input.h): where x's producer can give x back from
// what it keeps (a LayerNorm before the block), the node keeps those tensors, not new bytes.
//
// The recomputation needs fn's graph, not its output's values: backward runs from g through
// the graph, and the ops that make y need their inputs, not their outputs. Where fn ends in
// ops whose values nothing inside reads (a last Linear, a residual add), fn opens an
// UnreadValuesScope around them, and while recomputing, linear skips its product there
// (its output is zeros): a Transformer block's last projection, a third of its products, is
// not run twice. Gradients are unchanged bit for bit.
#pragma once
#include <functional>
#include <string>

#include "lb/core/tensor.h"

namespace lb::autograd {

Tensor recompute_in_backward(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x,
                             const std::string& name = "recompute", bool bf16_products = false);

// Recomputations started on this thread while it lives run in the forward's own precision.
class ExactRecomputeScope {
 public:
  ExactRecomputeScope();
  ~ExactRecomputeScope();
  ExactRecomputeScope(const ExactRecomputeScope&) = delete;
  ExactRecomputeScope& operator=(const ExactRecomputeScope&) = delete;
};

// True on this thread while a recomputation runs fn again: what a forward changes besides its
// output (BatchNorm's running statistics) must not change twice.
bool recomputing();

// Marks ops whose output values nothing in the recomputation reads (see above). Outside a
// recomputation it changes nothing: the first forward computes every value.
class UnreadValuesScope {
 public:
  UnreadValuesScope();
  ~UnreadValuesScope();
  UnreadValuesScope(const UnreadValuesScope&) = delete;
  UnreadValuesScope& operator=(const UnreadValuesScope&) = delete;
};

// True while recomputing inside an UnreadValuesScope: an op may leave its output's values
// uncomputed (zeros), recording its node as usual.
bool values_unread();

}  // namespace lb::autograd
