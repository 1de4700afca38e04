// A gradient of a (V, D) leaf that is zero but on a few rows, as an embedding's backward makes:
// the word embedding of a 32 x 128 BERT batch touches at most 4096 of its 30522 rows, so its
// dense gradient is mostly zeros. While a sink is set (an optimizer step fused into backward
// sets one), an op whose leaf gradient is row-sparse offers it to the sink instead of building
// the dense (V, D) tensor; the sink owns it from then on (the leaf's .grad stays as it was).
// CPU tensors only; an op on another device builds the dense gradient as before.
#pragma once
#include <functional>

#include "lb/core/tensor.h"

namespace lb::autograd {

struct RowSparseGrad {
  Tensor rows;    // (K,) i64: distinct row indices, ascending
  Tensor values;  // (K, D): the gradient of those rows; every other row's is zero
  bool defined() const { return rows.defined(); }
};

// leaf: the (V, D) leaf the gradient is for. True: the sink took it; false: the op builds
// the dense gradient instead.
using RowSparseGradSink = std::function<bool(const TensorImpl* leaf, RowSparseGrad grad)>;
// One sink per process, as the leaf-ready hook (node.h); an empty function removes it.
void set_row_sparse_grad_sink(RowSparseGradSink sink);
const RowSparseGradSink& row_sparse_grad_sink();

// a + b, row-sparse: the union of their rows, ascending; a row in both sums a's value and
// b's (in that order, as dense accumulation adds a later gradient to an earlier one).
RowSparseGrad add_row_sparse(const RowSparseGrad& a, const RowSparseGrad& b);
// dense[rows[k]] += values[k] for every k (dense: (V, D), contiguous, on the CPU).
void add_row_sparse_into(Tensor& dense, const RowSparseGrad& g);

}  // namespace lb::autograd
