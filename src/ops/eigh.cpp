// eigh: symmetric eigendecomposition (?syevd, divide and conquer: LAPACKE on the CPU,
// cuSOLVER on CUDA, src/backend/eigh.h), as torch.linalg.eigh(a, UPLO="U"): eigenvalues
// ascending, eigenvectors in the columns, so a = V diag(λ) Vᵀ. Not differentiable (used by
// calibration code under no-grad).
#include "lb/core/checks.h"
#include "lb/ops/linalg.h"
#include "src/backend/eigh.h"

namespace lb {

EighResult eigh(const Tensor& a) {
  detail::check_defined(a, "eigh", "a");
  detail::check_floating(a, "eigh");
  LB_CHECK(a.dim() == 2 && a.shape()[0] == a.shape()[1], "eigh: needs a square (n, n) matrix, got ",
           shape_str(a.shape()));
  const int64_t n = a.shape()[0];
  // The solver overwrites its input with the eigenvectors: work on a contiguous copy.
  Tensor v = Tensor::empty(a.shape(), a.dtype(), a.device());
  v.copy_(a);
  Tensor w = Tensor::empty({n}, a.dtype(), a.device());
  if (n == 0) return {w, v};
  const backend::EighKernels& k = backend::eigh_kernels(a.device());
  // Only the upper triangle is read; a NaN/Inf there makes syevd loop or return garbage.
  int64_t i = 0, j = 0;
  LB_CHECK(!k.first_nonfinite_upper(v, &i, &j), "eigh: a ", shape_str(a.shape()), " has a non-finite entry at (", i,
           ", ", j, ")");
  const int64_t info = k.syevd(v, w);
  LB_CHECK(info >= 0, "eigh: internal error, ?syevd rejected argument ", -info);
  LB_CHECK(info == 0, "eigh: ?syevd did not converge on a ", shape_str(a.shape()), " ", dtype_name(a.dtype()),
           " matrix (", info,
           " off-diagonal elements of an intermediate tridiagonal form did not converge). "
           "HINT: check the input for huge dynamic range; try f64");
  return {w, v};
}

}  // namespace lb
