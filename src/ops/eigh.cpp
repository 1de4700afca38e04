// eigh: symmetric eigendecomposition through LAPACKE ?syevd (divide and conquer), as
// torch.linalg.eigh(a, UPLO="U"): eigenvalues ascending, eigenvectors in the columns, so
// a = V diag(λ) Vᵀ. Not differentiable (used by calibration code under no-grad).
#include <lapacke.h>

#include <cmath>

#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/linalg.h"
#include "src/cpu/blas_config.h"

namespace lb {

namespace {
inline lapack_int syevd(lapack_int n, float* a, float* w) {
  return LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, a, n, w);
}
inline lapack_int syevd(lapack_int n, double* a, double* w) {
  return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, a, n, w);
}
}  // namespace

EighResult eigh(const Tensor& a) {
  detail::check_defined(a, "eigh", "a");
  detail::check_cpu(a, "eigh");
  detail::check_floating(a, "eigh");
  LB_CHECK(a.dim() == 2 && a.shape()[0] == a.shape()[1], "eigh: needs a square (n, n) matrix, got ",
           shape_str(a.shape()));
  const int64_t n = a.shape()[0];
  // LAPACK overwrites its input with the eigenvectors: work on a contiguous copy.
  Tensor v = Tensor::empty(a.shape(), a.dtype(), a.device());
  v.copy_(a);
  Tensor w = Tensor::empty({n}, a.dtype(), a.device());
  if (n == 0) return {w, v};
  detail::dispatch_float(a.dtype(), "eigh", [&](auto tag_) {
    using T = decltype(tag_);
    T* pv = v.data<T>();
    // Only the upper triangle is read; a NaN/Inf there makes syevd loop or return garbage.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j)
        LB_CHECK(std::isfinite(pv[i * n + j]), "eigh: a ", shape_str(a.shape()),
                 " has a non-finite entry at (", i, ", ", j, ")");
    const cpu::BlasThreads threads;  // OpenBLAS is single-threaded otherwise (blas_config.h)
    const lapack_int info = syevd(static_cast<lapack_int>(n), pv, w.data<T>());
    LB_CHECK(info >= 0, "eigh: internal error, LAPACKE ?syevd rejected argument ", -info);
    LB_CHECK(info == 0, "eigh: ?syevd did not converge on a ", shape_str(a.shape()), " ",
             dtype_name(a.dtype()), " matrix (", info,
             " off-diagonal elements of an intermediate tridiagonal form did not converge). "
             "HINT: check the input for huge dynamic range; try f64");
  });
  return {w, v};
}

}  // namespace lb
