// Joining, splitting and indexing, differentiable.
#pragma once
#include <vector>

#include "lb/core/tensor.h"

namespace lb {

Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
// Splits into pieces of the given sizes along dim (views; sizes must sum to the dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// Selects entries along dim by integer index (i32/i64, 1-D); backward scatter-adds.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace lb
