// Reductions over axes. Empty `dims` means all axes. Negative axes count from the end.
#pragma once
#include <vector>

#include "lb/core/tensor.h"

namespace lb {

Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// Max along one axis; gradient flows to the first maximal element (as PyTorch's max(dim)).
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // i64, not differentiable
// Sums a broadcast result back to `shape` (the reverse of expand). Differentiable.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace lb
