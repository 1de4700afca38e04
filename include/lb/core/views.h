// Views as geometry only: a new shape, strides and offset over the same storage, recording
// nothing on the tape. The kernels' plumbing (src/backend, src/cpu, cuda/) and the tape itself
// use these; everyone else calls Tensor's view methods (Tensor::view, slice, ...), which are
// these plus the backward (src/ops/tensor_views.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::views {

// `req` with its one -1 resolved for `numel` elements; checked against `from` (named in errors).
Shape infer_shape(const Shape& req, int64_t numel, const Shape& from);
// Strides for viewing (shape, strides) as `target` without a copy; false if the layout does not
// allow it (PyTorch's computeStride).
bool view_strides(const Shape& shape, const Shape& strides, const Shape& target, Shape& out);

Tensor view(const Tensor& t, const Shape& shape);  // an error where the layout needs a copy
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& t, int64_t a, int64_t b);
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor select(const Tensor& t, int64_t dim, int64_t index);  // drops `dim`
Tensor expand(const Tensor& t, const Shape& shape);         // t itself when nothing changes

}  // namespace lb::views
