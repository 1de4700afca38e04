// Reductions: sum/mean over any set of axes, max/argmax along one axis, sum_to: shapes,
// checks and autograd here for every device, the loops in the device's kernels
// (src/backend/reduce.h: src/cpu/reduce.cpp, cuda/reduce.cu).
#include "lb/ops/reduce.h"

#include <algorithm>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/elementwise.h"
#include "src/backend/copy.h"
#include "src/backend/reduce.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;

std::vector<int64_t> normalize_dims(std::vector<int64_t> dims, int64_t nd) {
  if (dims.empty())
    for (int64_t i = 0; i < nd; ++i) dims.push_back(i);
  for (auto& d : dims) d = normalize_dim(d, nd);
  std::sort(dims.begin(), dims.end());
  LB_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), "repeated reduction axis");
  if (nd == 0) dims.clear();
  return dims;
}

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    const bool red = std::binary_search(dims.begin(), dims.end(), i);
    if (!red) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Sum over `dims` without autograd; result has keepdim shape.
Tensor sum_raw(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor out = Tensor::empty(reduced_shape(x.shape(), dims, true), x.dtype(), x.device());
  backend::reduce_kernels(x.device()).sum(x, dims, out);
  return out;
}
}  // namespace

Tensor sum(const Tensor& x, std::vector<int64_t> dims_in, bool keepdim) {
  detail::check_defined(x, "sum", "x");
  detail::check_floating(x, "sum");
  const std::vector<int64_t> dims = normalize_dims(std::move(dims_in), x.dim());
  Tensor out = sum_raw(x, dims);
  if (!keepdim) out = make_view(out, reduced_shape(x.shape(), dims, false),
                                contiguous_strides(reduced_shape(x.shape(), dims, false)), 0);
  if (should_record({x})) {
    const Shape in_shape = x.shape(), keep = reduced_shape(x.shape(), dims, true);
    record("sum", out, {x}, {},
           [in_shape, keep](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
             return std::vector<Tensor>{backend::contiguous(g.reshape(keep).expand(in_shape))};
           });
  }
  return out;
}

Tensor mean(const Tensor& x, std::vector<int64_t> dims_in, bool keepdim) {
  detail::check_defined(x, "mean", "x");
  const std::vector<int64_t> dims = normalize_dims(dims_in, x.dim());
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[d];
  return mul_scalar(sum(x, dims, keepdim), count == 0 ? 0.0 : 1.0 / static_cast<double>(count));
}

namespace {
// Values and index of the first maximum along `dim` (keepdim layout).
void max_raw(const Tensor& x, int64_t dim, Tensor& values, Tensor& indices) {
  LB_CHECK(x.numel() > 0 && (x.dim() == 0 || x.shape()[dim] > 0), "max of an empty tensor ", x.str());
  Shape keep = x.shape();
  if (x.dim() > 0) keep[dim] = 1;
  values = Tensor::empty(keep, x.dtype(), x.device());
  indices = Tensor::empty(keep, DType::I64, x.device());
  backend::reduce_kernels(x.device()).max(x, dim, values, indices);
}
}  // namespace

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined(x, "max", "x");
  detail::check_floating(x, "max");
  dim = normalize_dim(dim, x.dim());
  Tensor values, indices;
  max_raw(x, dim, values, indices);
  if (!keepdim && x.dim() > 0) values = values.squeeze(dim);
  if (should_record({x})) {
    const Shape in_shape = x.shape();
    const Shape keep = indices.shape();
    record("max", values, {x}, {indices},
           [in_shape, keep, dim](const Tensor& g, const std::vector<Tensor>& s,
                                 const std::vector<bool>&) {
             Tensor gx = Tensor::zeros(in_shape, g.dtype(), g.device());
             backend::reduce_kernels(g.device()).max_backward(g.reshape(keep), s[0], dim, gx);
             return std::vector<Tensor>{gx};
           });
  }
  return values;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined(x, "argmax", "x");
  detail::check_floating(x, "argmax");
  dim = normalize_dim(dim, x.dim());
  Tensor values, indices;
  max_raw(x, dim, values, indices);
  if (!keepdim && x.dim() > 0) {
    Shape s = indices.shape();
    s.erase(s.begin() + dim);
    indices = make_view(indices, s, contiguous_strides(s), 0);
  }
  return indices;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  LB_CHECK(lead >= 0, "sum_to: cannot reduce ", shape_str(x.shape()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      const int64_t want = shape[i - lead];
      LB_CHECK(want == x.shape()[i] || want == 1, "sum_to: cannot reduce ",
               shape_str(x.shape()), " to ", shape_str(shape));
      if (want == 1 && x.shape()[i] != 1) dims.push_back(i);
    }
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

}  // namespace lb
