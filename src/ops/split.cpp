// split: pieces of a tensor along one axis, as views sharing its storage (torch.split with
// a list of sizes). Each piece is a differentiable slice: its gradient lands in its part of
// the input's gradient.
#include "lb/core/checks.h"
#include "lb/ops/shape_ops.h"

namespace lb {

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  detail::check_defined(x, "split", "x");
  LB_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  dim = normalize_dim(dim, x.dim());
  int64_t total = 0;
  std::string list;
  for (size_t i = 0; i < sizes.size(); ++i) list += (i ? ", " : "") + std::to_string(sizes[i]);
  for (size_t i = 0; i < sizes.size(); ++i) {
    LB_CHECK(sizes[i] >= 0, "split: size ", i, " is negative (sizes [", list, "])");
    total += sizes[i];
  }
  LB_CHECK(total == x.shape()[dim], "split: sizes [", list, "] sum to ", total, " but dim ", dim,
           " of ", shape_str(x.shape()), " has size ", x.shape()[dim]);
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t at = 0;
  for (int64_t n : sizes) {
    out.push_back(x.slice(dim, at, at + n));
    at += n;
  }
  return out;
}

}  // namespace lb
