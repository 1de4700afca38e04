// CUDA kernels of concat and index_select, the twins of src/cpu/shape_ops.cpp
// (src/backend/shape_ops.h): concat's runs as one strided 2-D copy, the row gather in the
// widest word the row size and addresses allow, and the backward as atomic adds (the CPU
// sums repeated indices in index order; here their order varies, within the parity
// tolerances; distinct indices, as in token packing, are exact).
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "src/backend/shape_ops.h"

namespace lb::backend {
namespace {

template <typename F>
void for_index_type(const Tensor& idx, F&& fn) {
  if (idx.dtype() == DType::I64) fn(idx.data<int64_t>());
  else fn(idx.data<int32_t>());
}

// out (outer, n, words) = x (outer, size, words) at the indices; W is the copied word.
template <typename W, typename Ix>
__global__ void gather_rows_kernel(const W* x, const Ix* idx, W* out, int64_t outer, int64_t n, int64_t size,
                                   int64_t words) {
  const int64_t total = outer * n * words;
  LB_CUDA_FOR_EACH(i, total) {
    const int64_t k = i % words, on = i / words, j = on % n, o = on / n;
    out[i] = x[(o * size + static_cast<int64_t>(idx[j])) * words + k];
  }
}

template <typename T, typename Ix>
__global__ void index_add_kernel(const T* g, const Ix* idx, T* gx, int64_t outer, int64_t n, int64_t size,
                                 int64_t inner) {
  const int64_t total = outer * n * inner;
  LB_CUDA_FOR_EACH(i, total) {
    const int64_t k = i % inner, on = i / inner, j = on % n, o = on / n;
    atomicAdd(gx + (o * size + static_cast<int64_t>(idx[j])) * inner + k, g[i]);
  }
}

void place_rows(const Tensor& x, Tensor& out, int64_t outer, int64_t run_bytes, int64_t out_row_bytes,
                int64_t dst_offset) {
  if (outer == 0 || run_bytes == 0) return;
  const cudaStream_t s = cuda::stream(out.device().index);
  LB_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(out.raw_data()) + dst_offset, static_cast<size_t>(out_row_bytes),
                                  x.raw_data(), static_cast<size_t>(run_bytes), static_cast<size_t>(run_bytes),
                                  static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, s));
}

template <typename W>
void gather_words(const Tensor& x, const Tensor& index, Tensor& out, int64_t outer, int64_t size, int64_t row_bytes,
                  cudaStream_t s) {
  const int64_t n = index.numel(), words = row_bytes / static_cast<int64_t>(sizeof(W));
  for_index_type(index, [&](const auto* idx) {
    gather_rows_kernel<W><<<cuda::blocks_for(outer * n * words), cuda::kThreads, 0, s>>>(
        static_cast<const W*>(x.raw_data()), idx, static_cast<W*>(out.raw_data()), outer, n, size, words);
  });
  LB_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

void gather_rows(const Tensor& x, const Tensor& index, Tensor& out, int64_t outer, int64_t size,
                 int64_t row_bytes) {
  if (outer * index.numel() * row_bytes == 0) return;
  const cudaStream_t s = cuda::stream(out.device().index);
  // Device allocations are at least 256-byte aligned, and rows start at multiples of row_bytes.
  const auto aligned = [&](size_t w) {
    return row_bytes % static_cast<int64_t>(w) == 0 && reinterpret_cast<uintptr_t>(x.raw_data()) % w == 0 &&
           reinterpret_cast<uintptr_t>(out.raw_data()) % w == 0;
  };
  if (aligned(16)) gather_words<int4>(x, index, out, outer, size, row_bytes, s);
  else if (aligned(4)) gather_words<int32_t>(x, index, out, outer, size, row_bytes, s);
  else gather_words<uint8_t>(x, index, out, outer, size, row_bytes, s);
}

void index_add_rows(const Tensor& g, const Tensor& index, Tensor& gx, int64_t outer, int64_t size, int64_t inner) {
  const int64_t n = index.numel();
  if (outer * n * inner == 0) return;
  const cudaStream_t s = cuda::stream(g.device().index);
  detail::dispatch_float(g.dtype(), "index_select backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    for_index_type(index, [&](const auto* idx) {
      index_add_kernel<T><<<cuda::blocks_for(outer * n * inner), cuda::kThreads, 0, s>>>(
          g.data<T>(), idx, gx.data<T>(), outer, n, size, inner);
    });
  });
  LB_CUDA_CHECK_LAUNCH("index_add_kernel");
}

}  // namespace

const ShapeKernels kCudaShapeOps{place_rows, gather_rows, index_add_rows};

}  // namespace lb::backend
