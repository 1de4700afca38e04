// Row-sparse leaf gradients (lb/autograd/row_sparse_grad.h): the sink, and the two sums a
// fused optimizer step needs (micro-batches accumulated; a leaf that also got a dense part).
#include "lb/autograd/row_sparse_grad.h"

#include "lb/core/checks.h"
#include "lb/core/dispatch.h"

namespace lb::autograd {

namespace {
RowSparseGradSink& sink() {
  static RowSparseGradSink s;
  return s;
}

void check(const RowSparseGrad& g, const char* what) {
  LB_CHECK(g.rows.defined() && g.values.defined() && g.rows.dtype() == DType::I64 && g.rows.dim() == 1 &&
               g.values.dim() == 2 && g.values.size(0) == g.rows.size(0) && g.rows.device().is_cpu() &&
               g.values.device().is_cpu() && g.rows.is_contiguous() && g.values.is_contiguous(),
           "internal: ", what, ": a row-sparse gradient is CPU rows (K,) i64 and values (K, D), got ",
           shape_str(g.rows.shape()), " and ", shape_str(g.values.shape()));
}
}  // namespace

void set_row_sparse_grad_sink(RowSparseGradSink s) { sink() = std::move(s); }
const RowSparseGradSink& row_sparse_grad_sink() { return sink(); }

RowSparseGrad add_row_sparse(const RowSparseGrad& a, const RowSparseGrad& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  check(a, "add_row_sparse");
  check(b, "add_row_sparse");
  LB_CHECK(a.values.size(1) == b.values.size(1) && a.values.dtype() == b.values.dtype(),
           "internal: add_row_sparse of values ", shape_str(a.values.shape()), " and ", shape_str(b.values.shape()));
  const int64_t na = a.rows.numel(), nb = b.rows.numel(), D = a.values.size(1);
  const int64_t* ra = a.rows.data<int64_t>();
  const int64_t* rb = b.rows.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0, j = 0; i < na || j < nb; ++n) {
    if (j == nb || (i < na && ra[i] < rb[j])) ++i;
    else if (i == na || rb[j] < ra[i]) ++j;
    else ++i, ++j;
  }
  RowSparseGrad out{Tensor::empty({n}, DType::I64), Tensor::empty({n, D}, a.values.dtype(), Device::cpu(),
                                                                   a.values.storage()->tag())};
  int64_t* ro = out.rows.data<int64_t>();
  detail::dispatch_float(a.values.dtype(), "add_row_sparse", [&](auto tag) {
    using T = decltype(tag);
    const T* va = a.values.data<T>();
    const T* vb = b.values.data<T>();
    T* vo = out.values.data<T>();
    for (int64_t i = 0, j = 0, k = 0; k < n; ++k) {
      T* dst = vo + k * D;
      if (j == nb || (i < na && ra[i] < rb[j])) {
        ro[k] = ra[i];
        for (int64_t d = 0; d < D; ++d) dst[d] = va[i * D + d];
        ++i;
      } else if (i == na || rb[j] < ra[i]) {
        ro[k] = rb[j];
        for (int64_t d = 0; d < D; ++d) dst[d] = vb[j * D + d];
        ++j;
      } else {
        ro[k] = ra[i];
        for (int64_t d = 0; d < D; ++d) dst[d] = va[i * D + d] + vb[j * D + d];
        ++i, ++j;
      }
    }
  });
  return out;
}

void add_row_sparse_into(Tensor& dense, const RowSparseGrad& g) {
  check(g, "add_row_sparse_into");
  LB_CHECK(dense.device().is_cpu() && dense.is_contiguous() && dense.dim() == 2 &&
               dense.size(1) == g.values.size(1) && dense.dtype() == g.values.dtype(),
           "internal: add_row_sparse_into a ", shape_str(dense.shape()), " tensor from values ",
           shape_str(g.values.shape()));
  const int64_t K = g.rows.numel(), V = dense.size(0), D = dense.size(1);
  const int64_t* rows = g.rows.data<int64_t>();
  detail::dispatch_float(dense.dtype(), "add_row_sparse_into", [&](auto tag) {
    using T = decltype(tag);
    const T* src = g.values.data<T>();
    T* dst = dense.data<T>();
    for (int64_t k = 0; k < K; ++k) {
      LB_CHECK(rows[k] >= 0 && rows[k] < V, "internal: row ", rows[k], " of a (", V, ", ", D, ") gradient");
      for (int64_t d = 0; d < D; ++d) dst[rows[k] * D + d] += src[k * D + d];
    }
  });
}

}  // namespace lb::autograd
