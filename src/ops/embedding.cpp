// embedding: gather rows of weight (V, D) by integer indices of any shape -> (..., D), and
// the backward scatter-add into a dense (V, D) weight gradient, as
// torch.nn.functional.embedding (padding_idx rows get no gradient; the forward still reads
// them). Saved for backward: the indices only.
#include <cstring>

#include <omp.h>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/nn.h"

namespace lb {

namespace {
using detail::contiguous_nograd;

constexpr int64_t kParallelMin = 1 << 15;  // elements copied

// Index k of a contiguous i32/i64 tensor as i64.
template <typename I>
void for_indices(const Tensor& idx, I&& fn) {
  if (idx.dtype() == DType::I64) fn(idx.data<int64_t>());
  else fn(idx.data<int32_t>());
}

// Validates every index before touching memory (an exception cannot leave an OpenMP loop).
template <typename Ix>
void check_indices(const Ix* ix, int64_t n, int64_t V, const Tensor& indices) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t v = static_cast<int64_t>(ix[k]);
    if (v < 0 || v >= V)
      LB_FAIL("embedding: index ", v, " at flat position ", k, " of indices ",
              shape_str(indices.shape()), " is out of range for a vocabulary of size ", V,
              " (valid: 0..", V - 1, "). HINT: check the tokenizer's vocab against the "
              "checkpoint's vocab_size");
  }
}

// dweight[ix[k]] += dout[k] for every k whose index is not padding_idx. Threads own disjoint
// ranges of vocabulary rows and each scans all indices, so there are no races and the
// summation order (index order) is deterministic.
template <typename T, typename Ix>
void embedding_backward(const T* dout, const Ix* ix, int64_t n, int64_t padding_idx, T* dweight,
                        int64_t V, int64_t D) {
#pragma omp parallel if (n * D > kParallelMin)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = V * t / nt, hi = V * (t + 1) / nt;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t v = static_cast<int64_t>(ix[k]);
      if (v < lo || v >= hi || v == padding_idx) continue;
      T* dst = dweight + v * D;
      const T* src = dout + k * D;
#pragma omp simd
      for (int64_t j = 0; j < D; ++j) dst[j] += src[j];
    }
  }
}
}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx) {
  detail::check_defined(indices, "embedding", "indices");
  detail::check_defined(weight, "embedding", "weight");
  detail::check_cpu(indices, "embedding");
  detail::check_cpu(weight, "embedding");
  detail::check_floating(weight, "embedding");
  LB_CHECK(indices.dtype() == DType::I64 || indices.dtype() == DType::I32,
           "embedding: indices must be i32 or i64, got ", dtype_name(indices.dtype()), " ",
           shape_str(indices.shape()));
  LB_CHECK(weight.dim() == 2, "embedding: weight must be (V, D), got ", shape_str(weight.shape()));
  const int64_t V = weight.size(0), D = weight.size(1);
  LB_CHECK(padding_idx >= -1 && padding_idx < V, "embedding: padding_idx ", padding_idx,
           " must be -1 (none) or in [0, ", V, ")");
  const Tensor ic = contiguous_nograd(indices);
  const Tensor wc = contiguous_nograd(weight);
  const int64_t n = ic.numel();
  Shape out_shape = indices.shape();
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  const size_t row_bytes = static_cast<size_t>(D) * dtype_size(weight.dtype());
  const auto* src = static_cast<const char*>(wc.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for_indices(ic, [&](const auto* ix) {
    check_indices(ix, n, V, indices);
#pragma omp parallel for if (n * D > kParallelMin) schedule(static)
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(dst + k * row_bytes, src + static_cast<int64_t>(ix[k]) * row_bytes, row_bytes);
  });

  if (autograd::should_record({weight})) {
    autograd::record(
        "embedding", out, {indices, weight}, {ic},
        [V, D, n, padding_idx](const Tensor& g, const std::vector<Tensor>& s,
                               const std::vector<bool>& need) {
          if (!need[1]) return std::vector<Tensor>{Tensor(), Tensor()};
          const Tensor gc = contiguous_nograd(g);
          Tensor dw = Tensor::zeros({V, D}, gc.dtype(), gc.device());
          detail::dispatch_float(gc.dtype(), "embedding backward", [&](auto tag) {
            using T = decltype(tag);
            for_indices(s[0], [&](const auto* ix) {
              embedding_backward<T>(gc.data<T>(), ix, n, padding_idx, dw.data<T>(), V, D);
            });
          });
          return std::vector<Tensor>{Tensor(), dw};
        });
  }
  return out;
}

}  // namespace lb
