// Scalar helpers shared by the float GEMM kernels (sgemm_avx512.cpp, sgemm_bf16.cpp): plain
// C++ compiled for the build's baseline (include before any LB_ISA_BEGIN region).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace lb::cpu::gemm_detail {

// C = beta·C (k = 0 or alpha = 0); beta = 0 writes zeros without reading.
inline void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  if (beta == 1.f) return;
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.f)
      std::memset(row, 0, static_cast<size_t>(n) * sizeof(float));
    else
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
  }
}

// The cases with no product to form: an empty C (nothing to do), or k = 0 or alpha = 0 (C =
// beta·C). Returns whether it handled the call.
inline bool gemm_without_product(int64_t m, int64_t n, int64_t k, float alpha, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return true;
  if (k > 0 && alpha != 0.f) return false;
  scale_c(m, n, beta, c, ldc);
  return true;
}

// Splits `len` into ceil(len / max_block) near-equal blocks, each a multiple of `unit`
// (but never more than max_block), so no block is a thin leftover.
inline int64_t balanced_block(int64_t len, int64_t max_block, int64_t unit) {
  const int64_t blocks = (len + max_block - 1) / max_block;
  const int64_t per = (len + blocks - 1) / blocks;
  return std::min(max_block, (per + unit - 1) / unit * unit);
}

// A per-thread packing buffer of T, 64-byte aligned, grown on demand and kept for the
// thread's life (declare it thread_local).
template <typename T>
struct PackBuffer {
  T* p = nullptr;
  size_t cap = 0;  // elements
  ~PackBuffer() { std::free(p); }
  T* get(size_t n) {
    if (n > cap) {
      std::free(p);
      const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
      p = static_cast<T*>(std::aligned_alloc(64, bytes));
      cap = p ? bytes / sizeof(T) : 0;
      if (!p) std::abort();
    }
    return p;
  }
};

}  // namespace lb::cpu::gemm_detail
