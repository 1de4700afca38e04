// Internal: the symmetric eigen-solver kernels of one device (see backend.h), on a
// contiguous square f32/f64 matrix.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct EighKernels {
  // The first non-finite entry of a's upper triangle (row-major order) in (*i, *j); false
  // when there is none.
  bool (*first_nonfinite_upper)(const Tensor& a, int64_t* i, int64_t* j);
  // v (n, n): in, the matrix (its upper triangle is read); out, the eigenvectors in the
  // columns, as LAPACK's row-major ?syevd('V', 'U'). w (n): the eigenvalues, ascending.
  // Returns the solver's info: 0 done, > 0 not converged, < 0 a bad argument.
  int64_t (*syevd)(Tensor& v, Tensor& w);
};

// src/cpu/eigh.cpp, cuda/eigh.cu
LB_KERNEL_TABLES(EighKernels, eigh_kernels, kCpuEigh, kCudaEigh, "eigh")

}  // namespace lb::backend
