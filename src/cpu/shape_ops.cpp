// CPU kernels of concat and index_select (src/backend/shape_ops.h): memcpy of contiguous
// runs, split across OpenMP threads when large.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "lb/core/dispatch.h"
#include "src/backend/shape_ops.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelBytes = 1 << 18;

template <typename F>
void for_index_type(const Tensor& idx, F&& fn) {
  if (idx.dtype() == DType::I64) fn(idx.data<int64_t>());
  else fn(idx.data<int32_t>());
}

void place_rows(const Tensor& x, Tensor& out, int64_t outer, int64_t run_bytes, int64_t out_row_bytes,
                int64_t dst_offset) {
  const char* src = static_cast<const char*>(x.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  const size_t run = static_cast<size_t>(run_bytes);
#pragma omp parallel for if (run_bytes * outer > kParallelBytes) schedule(static)
  for (int64_t r = 0; r < outer; ++r) std::memcpy(o + r * out_row_bytes + dst_offset, src + r * run_bytes, run);
}

void gather_rows(const Tensor& x, const Tensor& index, Tensor& out, int64_t outer, int64_t size,
                 int64_t row_bytes) {
  const int64_t n = index.numel();
  const size_t run = static_cast<size_t>(row_bytes);
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for_index_type(index, [&](const auto* idx) {
#pragma omp parallel for collapse(2) if (row_bytes * outer * n > kParallelBytes) schedule(static)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + (o * n + j) * row_bytes, src + (o * size + static_cast<int64_t>(idx[j])) * row_bytes, run);
  });
}

// Repeated indices write the same gx row, so threads split (outer, column chunks), never
// the index list: the sums run in index order, deterministically.
template <typename T, typename Ix>
void index_add(T* dx, const T* g, const Ix* idx, int64_t n, int64_t outer, int64_t size, int64_t inner) {
  // Few outer rows (an embedding table: outer = 1): split the columns across threads
  // instead, in runs of at least 16 values.
  const int64_t threads = omp_get_max_threads();
  const int64_t chunks = outer >= threads ? 1 : std::clamp<int64_t>(inner / 16, 1, threads);
  const int64_t width = (inner + chunks - 1) / chunks;
#pragma omp parallel for collapse(2) if (outer * n * inner * static_cast<int64_t>(sizeof(T)) > kParallelBytes) \
    schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t c0 = c * width, c1 = std::min(inner, c0 + width);
      for (int64_t j = 0; j < n; ++j) {
        const T* src = g + (o * n + j) * inner;
        T* dst = dx + (o * size + static_cast<int64_t>(idx[j])) * inner;
        for (int64_t k = c0; k < c1; ++k) dst[k] += src[k];
      }
    }
}

void index_add_rows(const Tensor& g, const Tensor& index, Tensor& gx, int64_t outer, int64_t size, int64_t inner) {
  detail::dispatch_float(g.dtype(), "index_select backward", [&](auto tag) {
    using T = decltype(tag);
    for_index_type(index, [&](const auto* idx) {
      index_add<T>(gx.data<T>(), g.data<T>(), idx, index.numel(), outer, size, inner);
    });
  });
}

}  // namespace

const ShapeKernels kCpuShapeOps{place_rows, gather_rows, index_add_rows};

}  // namespace lb::backend
