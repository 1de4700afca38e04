// Internal: the fast Walsh–Hadamard transform kernel of one device (see backend.h), for the
// op in src/ops/fwht.cpp: x (outer, L, inner) contiguous -> y (outer, Lp, inner), the axis
// zero-padded to Lp (a multiple of B = 2^block_log2) and transformed in blocks of B by the
// butterfly with h doubling from 1 (both devices give the scalar butterfly's values).
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct FwhtKernels {
  void (*forward)(const Tensor& x, Tensor& y, int64_t outer, int64_t L, int64_t Lp, int64_t inner, int64_t block_log2);
};

// src/cpu/fwht.cpp, cuda/fwht.cu
LB_KERNEL_TABLES(FwhtKernels, fwht_kernels, kCpuFwht, kCudaFwht, "fwht")

}  // namespace lb::backend
