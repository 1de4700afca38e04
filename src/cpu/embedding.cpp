// CPU embedding kernels (src/backend/embedding.h).
#include <cstring>
#include <vector>

#include <omp.h>

#include "lb/core/dispatch.h"
#include "src/backend/embedding.h"
#include "src/backend/row_slots.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements copied

// Index k of a contiguous i32/i64 tensor as i64.
template <typename I>
void for_indices(const Tensor& idx, I&& fn) {
  if (idx.dtype() == DType::I64) fn(idx.data<int64_t>());
  else fn(idx.data<int32_t>());
}

int64_t first_bad_index(const Tensor& indices, int64_t V, int64_t* value) {
  int64_t bad = -1;
  for_indices(indices, [&](const auto* ix) {
    for (int64_t k = 0; k < indices.numel(); ++k) {
      const int64_t v = static_cast<int64_t>(ix[k]);
      if (v < 0 || v >= V) {
        bad = k;
        *value = v;
        return;
      }
    }
  });
  return bad;
}

void gather(const Tensor& indices, const Tensor& weight, Tensor& out) {
  const int64_t n = indices.numel(), D = weight.size(1);
  const size_t row_bytes = static_cast<size_t>(D) * dtype_size(weight.dtype());
  const auto* src = static_cast<const char*>(weight.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for_indices(indices, [&](const auto* ix) {
#pragma omp parallel for if (n * D > kParallelMin) schedule(static)
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(dst + k * row_bytes, src + static_cast<int64_t>(ix[k]) * row_bytes, row_bytes);
  });
}

// Threads own disjoint ranges of vocabulary rows and each scans all indices, so there are no
// races and the summation order (index order) is deterministic.
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

void scatter_add(const Tensor& dout, const Tensor& indices, int64_t padding_idx, Tensor& dweight) {
  const int64_t V = dweight.size(0), D = dweight.size(1);
  detail::dispatch_float(dout.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    for_indices(indices, [&](const auto* ix) {
      embedding_backward<T>(dout.data<T>(), ix, indices.numel(), padding_idx, dweight.data<T>(), V, D);
    });
  });
}

Tensor touched_rows(const Tensor& indices, int64_t V, int64_t padding_idx) {
  std::vector<uint8_t> seen(static_cast<size_t>(V), 0);
  int64_t K = 0;
  for_indices(indices, [&](const auto* ix) {
    for (int64_t k = 0; k < indices.numel(); ++k) {
      const int64_t v = static_cast<int64_t>(ix[k]);
      if (v != padding_idx && !seen[v]) seen[v] = 1, ++K;
    }
  });
  Tensor rows = Tensor::empty({K}, DType::I64);
  int64_t* r = rows.data<int64_t>();
  for (int64_t v = 0; v < V; ++v)
    if (seen[v]) *r++ = v;
  return rows;
}

// As embedding_backward, into the touched rows' slots: the same per-row sums in index order.
void scatter_add_rows(const Tensor& dout, const Tensor& indices, const Tensor& rows, int64_t V, Tensor& values) {
  const int64_t D = values.size(1), K = rows.numel();
  const std::vector<int64_t> slot = row_slots(rows, V);
  detail::dispatch_float(dout.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = dout.data<T>();
    T* out = values.data<T>();
    for_indices(indices, [&](const auto* ix) {
      const int64_t n = indices.numel();
#pragma omp parallel if (n * D > kParallelMin)
      {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = K * t / nt, hi = K * (t + 1) / nt;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t s = slot[static_cast<int64_t>(ix[j])];
          if (s < lo || s >= hi) continue;  // padding_idx has no slot (-1)
          T* dst = out + s * D;
          const T* src = g + j * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) dst[d] += src[d];
        }
      }
    });
  });
}

}  // namespace

const EmbeddingKernels kCpuEmbedding{first_bad_index, gather, scatter_add, touched_rows, scatter_add_rows};

}  // namespace lb::backend
