// embedding: gather rows of weight (V, D) by integer indices of any shape -> (..., D), and
// the backward scatter-add into a dense (V, D) weight gradient, as
// torch.nn.functional.embedding (padding_idx rows get no gradient; the forward still reads
// them). Saved for backward: the indices only. While a row-sparse sink is set (an optimizer
// step fused into backward) and the weight is a leaf, its gradient is offered as the touched
// rows only (lb/autograd/row_sparse_grad.h), never built dense.
#include "lb/autograd/node.h"
#include "lb/autograd/row_sparse_grad.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/nn.h"
#include "src/backend/copy.h"
#include "src/backend/embedding.h"

namespace lb {

namespace {

// The weight's gradient as rows if the sink takes it (true), for a leaf weight on a device
// with the row-sparse kernels.
bool offer_row_sparse(const TensorImpl* leaf, const Tensor& gc, const Tensor& indices, int64_t V, int64_t D,
                      int64_t padding_idx) {
  const autograd::RowSparseGradSink& sink = autograd::row_sparse_grad_sink();
  const backend::EmbeddingKernels& k = backend::embedding_kernels(gc.device());
  if (!leaf || !sink || !k.touched_rows || !k.scatter_add_rows) return false;
  autograd::RowSparseGrad g;
  g.rows = k.touched_rows(indices, V, padding_idx);
  g.values = Tensor::zeros({g.rows.numel(), D}, gc.dtype(), gc.device(), MemTag::Gradient);
  k.scatter_add_rows(gc, indices, g.rows, V, g.values);
  return sink(leaf, std::move(g));
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx) {
  detail::check_defined(indices, "embedding", "indices");
  detail::check_defined(weight, "embedding", "weight");
  detail::check_same_device(indices, weight, "embedding");
  detail::check_floating(weight, "embedding");
  LB_CHECK(indices.dtype() == DType::I64 || indices.dtype() == DType::I32,
           "embedding: indices must be i32 or i64, got ", dtype_name(indices.dtype()), " ",
           shape_str(indices.shape()));
  LB_CHECK(weight.dim() == 2, "embedding: weight must be (V, D), got ", shape_str(weight.shape()));
  const int64_t V = weight.size(0), D = weight.size(1);
  LB_CHECK(padding_idx >= -1 && padding_idx < V, "embedding: padding_idx ", padding_idx,
           " must be -1 (none) or in [0, ", V, ")");
  const Tensor ic = backend::contiguous(indices);
  const Tensor wc = backend::contiguous(weight);
  Shape out_shape = indices.shape();
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  const backend::EmbeddingKernels& kernels = backend::embedding_kernels(weight.device());
  // Every index is checked before any memory is touched.
  int64_t bad_value = 0;
  const int64_t bad = kernels.first_bad_index(ic, V, &bad_value);
  if (bad >= 0)
    LB_FAIL("embedding: index ", bad_value, " at flat position ", bad, " of indices ", shape_str(indices.shape()),
            " is out of range for a vocabulary of size ", V, " (valid: 0..", V - 1,
            "). HINT: check the tokenizer's vocab against the checkpoint's vocab_size");
  kernels.gather(ic, wc, out);

  if (autograd::should_record({weight})) {
    // Identity only (the sink's key): the leaf outlives the graph that refers to it.
    const TensorImpl* leaf = weight.grad_fn() ? nullptr : weight.impl();
    autograd::record(
        "embedding", out, {indices, weight}, {ic},
        [V, D, padding_idx, leaf](const Tensor& g, const std::vector<Tensor>& s,
                               const std::vector<bool>& need) {
          if (!need[1]) return std::vector<Tensor>{Tensor(), Tensor()};
          const Tensor gc = backend::contiguous(g);
          if (offer_row_sparse(leaf, gc, s[0], V, D, padding_idx)) return std::vector<Tensor>{Tensor(), Tensor()};
          Tensor dw = Tensor::zeros({V, D}, gc.dtype(), gc.device());
          backend::embedding_kernels(gc.device()).scatter_add(gc, s[0], padding_idx, dw);
          return std::vector<Tensor>{Tensor(), dw};
        });
  }
  return out;
}

}  // namespace lb
