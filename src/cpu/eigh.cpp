// CPU eigen-solver kernels (src/backend/eigh.h): LAPACKE ?syevd (divide and conquer).
#include <lapacke.h>

#include <cmath>

#include "lb/core/dispatch.h"
#include "src/backend/eigh.h"
#include "src/cpu/blas_config.h"

namespace lb::backend {
namespace {

inline lapack_int lapack_syevd(lapack_int n, float* a, float* w) {
  return LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, a, n, w);
}
inline lapack_int lapack_syevd(lapack_int n, double* a, double* w) {
  return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, a, n, w);
}

bool first_nonfinite_upper(const Tensor& a, int64_t* i_out, int64_t* j_out) {
  const int64_t n = a.size(0);
  bool found = false;
  detail::dispatch_float(a.dtype(), "eigh", [&](auto tag) {
    using T = decltype(tag);
    const T* p = a.data<T>();
    for (int64_t i = 0; i < n && !found; ++i)
      for (int64_t j = i; j < n; ++j)
        if (!std::isfinite(p[i * n + j])) {
          *i_out = i;
          *j_out = j;
          found = true;
          break;
        }
  });
  return found;
}

int64_t syevd(Tensor& v, Tensor& w) {
  int64_t info = 0;
  detail::dispatch_float(v.dtype(), "eigh", [&](auto tag) {
    using T = decltype(tag);
    const cpu::BlasThreads threads;  // OpenBLAS is single-threaded otherwise (blas_config.h)
    info = lapack_syevd(static_cast<lapack_int>(v.size(0)), v.data<T>(), w.data<T>());
  });
  return info;
}

}  // namespace

const EighKernels kCpuEigh{first_nonfinite_upper, syevd};

}  // namespace lb::backend
