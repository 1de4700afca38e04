// Matrix products (OpenBLAS on the CPU) and symmetric eigendecomposition (LAPACKE).
#pragma once
#include "lb/core/tensor.h"

namespace lb {

// a (..., M, K) or its transpose, b (..., K, N) or its transpose -> (..., M, N).
// Batch dims broadcast; 2-D operands are the common case. trans_a means a is stored as
// (..., K, M) and used transposed (no copy).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// y = x wᵀ + b; x (..., I), w (O, I), b (O) or undefined. The vanilla exact backward; the
// pluggable-strategy version lives in nn/ and builds on this.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// Symmetric eigendecomposition of a (n, n) f32/f64 matrix (upper triangle read), not
// differentiable. Eigenvalues ascending (LAPACK order); eigenvectors in columns.
struct EighResult {
  Tensor eigenvalues;   // (n)
  Tensor eigenvectors;  // (n, n)
};
EighResult eigh(const Tensor& a);

}  // namespace lb
