// index_select: entries of x along `dim` picked by an integer index (torch.index_select).
// Any dtype for x (a byte copy); i32/i64 index, 1-D (or 0-d, taken as one entry). Indices
// must lie in [0, size): negative or too large ones are errors, as in PyTorch.
// Backward (f32/f64) scatter-adds the gradient rows back: repeated indices accumulate.
// Only the index is saved.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/shape_ops.h"

namespace lb {

namespace {
constexpr int64_t kParallelBytes = 1 << 18;

// The index as int64 values, validated against the axis size.
std::vector<int64_t> read_index(const Tensor& index, int64_t size, int64_t dim, const Shape& xs) {
  LB_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32,
           "index_select: index must be i32 or i64, got ", dtype_name(index.dtype()), " ",
           shape_str(index.shape()));
  LB_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape ",
           shape_str(index.shape()));
  detail::check_cpu(index, "index_select");
  const Tensor ic = detail::contiguous_nograd(index);
  std::vector<int64_t> idx(ic.numel());
  for (int64_t j = 0; j < ic.numel(); ++j)
    idx[j] = ic.dtype() == DType::I64 ? ic.data<int64_t>()[j] : ic.data<int32_t>()[j];
  for (int64_t j = 0; j < static_cast<int64_t>(idx.size()); ++j)
    LB_CHECK(idx[j] >= 0 && idx[j] < size, "index_select: index[", j, "] = ", idx[j],
             " is out of range for dim ", dim, " of ", shape_str(xs), " (size ", size, ")");
  return idx;
}

// dx (outer, size, inner) += g (outer, n, inner) scattered by idx. Repeated indices write
// the same dx row, so threads split (outer, column chunks), never the index list.
template <typename T>
void index_add_rows(T* dx, const T* g, const std::vector<int64_t>& idx, int64_t outer,
                    int64_t size, int64_t inner) {
  const int64_t n = static_cast<int64_t>(idx.size());
  // Few outer rows (an embedding table: outer = 1): split the columns across threads
  // instead, in runs of at least 16 values.
  const int64_t threads = omp_get_max_threads();
  const int64_t chunks =
      outer >= threads ? 1 : std::clamp<int64_t>(inner / 16, 1, threads);
  const int64_t width = (inner + chunks - 1) / chunks;
#pragma omp parallel for collapse(2) if (outer * n * inner * sizeof(T) > kParallelBytes) \
    schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t c0 = c * width, c1 = std::min(inner, c0 + width);
      for (int64_t j = 0; j < n; ++j) {
        const T* src = g + (o * n + j) * inner;
        T* dst = dx + (o * size + idx[j]) * inner;
        for (int64_t k = c0; k < c1; ++k) dst[k] += src[k];
      }
    }
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined(x, "index_select", "x");
  detail::check_defined(index, "index_select", "index");
  detail::check_cpu(x, "index_select");
  LB_CHECK(x.dim() > 0, "index_select: x must have at least one dimension, got shape ()");
  dim = normalize_dim(dim, x.dim());
  const Shape xs = x.shape();
  const int64_t size = xs[dim];
  const std::vector<int64_t> idx = read_index(index, size, dim, xs);
  const int64_t n = static_cast<int64_t>(idx.size());

  Shape out_shape = xs;
  out_shape[dim] = n;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xs[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= xs[d];
  if (out.numel() > 0) {
    const Tensor xc = detail::contiguous_nograd(x);
    const size_t es = dtype_size(x.dtype());
    const size_t run = static_cast<size_t>(inner) * es;
    const char* src = static_cast<const char*>(xc.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
#pragma omp parallel for collapse(2) if (static_cast<int64_t>(run) * outer * n > kParallelBytes) \
    schedule(static)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + (o * n + j) * run, src + (o * size + idx[j]) * run, run);
  }

  if (autograd::should_record({x})) {
    // Only the index is saved (usually the caller's own token ids: no copy), never x.
    // Backward re-reads and re-checks it, so an index changed in place cannot write out
    // of bounds.
    const Tensor saved_idx = detail::contiguous_nograd(index);
    const int64_t o_ = outer, i_ = inner, dim_ = dim;
    autograd::record(
        "index_select", out, {x}, {saved_idx},
        [xs, o_, i_, dim_](const Tensor& g, const std::vector<Tensor>& saved,
                           const std::vector<bool>&) {
          const int64_t s_ = xs[dim_];
          const std::vector<int64_t> ids = read_index(saved[0], s_, dim_, xs);
          Tensor gx = Tensor::zeros(xs, g.dtype(), g.device());
          const Tensor gc = detail::contiguous_nograd(g);
          detail::dispatch_float(g.dtype(), "index_select backward", [&](auto tag_) {
            using T = decltype(tag_);
            index_add_rows<T>(gx.data<T>(), gc.data<T>(), ids, o_, s_, i_);
          });
          return std::vector<Tensor>{gx};
        });
  }
  return out;
}

}  // namespace lb
