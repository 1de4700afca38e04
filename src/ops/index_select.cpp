// index_select: entries of x along `dim` picked by an integer index (torch.index_select).
// Any dtype for x (a byte copy); i32/i64 index, 1-D (or 0-d, taken as one entry). Indices
// must lie in [0, size): negative or too large ones are errors, as in PyTorch.
// Backward (f32/f64) scatter-adds the gradient rows back: repeated indices accumulate.
// Only the index is saved.
#include "lb/autograd/kept_input.h"
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/shape_ops.h"
#include "src/backend/copy.h"
#include "src/backend/embedding.h"
#include "src/backend/shape_ops.h"

namespace lb {

namespace {

// The index, contiguous, validated against the axis size on its own device.
Tensor checked_index(const Tensor& index, int64_t size, int64_t dim, const Shape& xs) {
  LB_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32,
           "index_select: index must be i32 or i64, got ", dtype_name(index.dtype()), " ",
           shape_str(index.shape()));
  LB_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape ",
           shape_str(index.shape()));
  const Tensor ic = backend::contiguous(index);
  int64_t value = 0;
  const int64_t j = backend::embedding_kernels(ic.device()).first_bad_index(ic, size, &value);
  LB_CHECK(j < 0, "index_select: index[", j, "] = ", value, " is out of range for dim ", dim, " of ",
           shape_str(xs), " (size ", size, ")");
  return ic;
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined(x, "index_select", "x");
  detail::check_defined(index, "index_select", "index");
  detail::check_same_device(x, index, "index_select");
  LB_CHECK(x.dim() > 0, "index_select: x must have at least one dimension, got shape ()");
  dim = normalize_dim(dim, x.dim());
  const Shape xs = x.shape();
  const int64_t size = xs[dim];
  const Tensor idx = checked_index(index, size, dim, xs);
  const int64_t n = idx.numel();

  Shape out_shape = xs;
  out_shape[dim] = n;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xs[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= xs[d];
  if (out.numel() > 0)
    backend::shape_kernels(x.device())
        .gather_rows(backend::contiguous(x), idx, out, outer, size,
                     inner * static_cast<int64_t>(dtype_size(x.dtype())));

  if (autograd::should_record({x})) {
    // Only the index is saved (usually the caller's own token ids: no copy), never x.
    // Backward re-reads and re-checks it, so an index changed in place cannot write out
    // of bounds.
    const Tensor saved_idx = idx;
    const int64_t o_ = outer, i_ = inner, dim_ = dim;
    autograd::record(
        "index_select", out, {x}, {saved_idx},
        [xs, o_, i_, dim_](const Tensor& g, const std::vector<Tensor>& saved,
                           const std::vector<bool>&) {
          const int64_t s_ = xs[dim_];
          const Tensor ids = checked_index(saved[0], s_, dim_, xs);
          Tensor gx = Tensor::zeros(xs, g.dtype(), g.device());
          backend::shape_kernels(g.device())
              .index_add_rows(backend::contiguous(g), ids, gx, o_, s_, i_);
          return std::vector<Tensor>{gx};
        });
    // x recomputable from what the tape holds: so is the gather of it (exact lean).
    if (autograd::Node::OutputRecipe r = autograd::recipe_of(x); r.fn) {
      r.kept.push_back(saved_idx);
      out.grad_fn()->set_output_recipe(
          {std::move(r.kept), [fn = std::move(r.fn), out_shape, outer, size, inner](const std::vector<Tensor>& kept) {
             const Tensor xs = fn({kept.begin(), kept.end() - 1});
             Tensor o = Tensor::empty(out_shape, xs.dtype(), xs.device());
             if (o.numel() > 0)
               backend::shape_kernels(xs.device())
                   .gather_rows(xs, kept.back(), o, outer, size, inner * static_cast<int64_t>(dtype_size(xs.dtype())));
             return o;
           }});
    }
  }
  return out;
}

}  // namespace lb
