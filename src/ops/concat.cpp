// concat: joins tensors along one axis (torch.cat). Works for every dtype (a byte copy);
// differentiable for f32/f64, where the backward hands each input its slice of the gradient
// (a view: nothing is saved).
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/shape_ops.h"
#include "src/backend/shape_ops.h"

namespace lb {

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  LB_CHECK(!xs.empty(), "concat: needs at least one tensor");
  for (size_t i = 0; i < xs.size(); ++i)
    LB_CHECK(xs[i].defined(), "concat: input ", i, " is undefined");
  const Tensor& x0 = xs[0];
  const int64_t nd = x0.dim();
  LB_CHECK(nd > 0, "concat: input 0 is 0-d (shape ()); zero-dimensional tensors cannot be "
           "concatenated. HINT: unsqueeze(0) them first");
  dim = normalize_dim(dim, nd);
  Shape out_shape = x0.shape();
  out_shape[dim] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    LB_CHECK(x.dtype() == x0.dtype(), "concat: input ", i, " has dtype ", dtype_name(x.dtype()),
             " ", shape_str(x.shape()), " but input 0 has ", dtype_name(x0.dtype()), " ",
             shape_str(x0.shape()), ". HINT: convert with .to(dtype)");
    LB_CHECK(x.device() == x0.device(), "concat: input ", i, " is on ", x.device().str(),
             " but input 0 is on ", x0.device().str());
    bool ok = x.dim() == nd;
    for (int64_t d = 0; ok && d < nd; ++d) ok = d == dim || x.shape()[d] == x0.shape()[d];
    LB_CHECK(ok, "concat along dim ", dim, ": input ", i, " has shape ", shape_str(x.shape()),
             " but input 0 has shape ", shape_str(x0.shape()),
             "; all dims except the concatenated one must match");
    out_shape[dim] += x.shape()[dim];
  }

  // View as (outer, size_i * inner) rows: each input contributes one contiguous run per
  // outer index, at column offset off_i * inner of the output row.
  Tensor out = Tensor::empty(out_shape, x0.dtype(), x0.device());
  const int64_t es = static_cast<int64_t>(dtype_size(x0.dtype()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out_shape[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= out_shape[d];
  const int64_t out_row = out_shape[dim] * inner;
  const backend::ShapeKernels& k = backend::shape_kernels(out.device());
  int64_t off = 0;
  for (const Tensor& x : xs) {
    const int64_t n = x.shape()[dim];
    if (n == 0 || outer * inner == 0) continue;
    if (x.is_contiguous()) {
      k.place_rows(x, out, outer, n * inner * es, out_row * es, off * inner * es);
    } else {
      out.slice(dim, off, off + n).copy_(x);  // strided walk, no autograd
    }
    off += n;
  }

  if (autograd::should_record(xs)) {  // only float tensors can require grad
    std::vector<int64_t> sizes;
    for (const Tensor& x : xs) sizes.push_back(x.shape()[dim]);
    autograd::record("concat", out, xs, {},
                     [sizes, dim](const Tensor& g, const std::vector<Tensor>&,
                                  const std::vector<bool>& need) {
                       std::vector<Tensor> gs(sizes.size());
                       int64_t at = 0;
                       for (size_t i = 0; i < sizes.size(); ++i) {
                         if (need[i]) gs[i] = g.slice(dim, at, at + sizes[i]);
                         at += sizes[i];
                       }
                       return gs;
                     });
  }
  return out;
}

}  // namespace lb
