// Internal: the dropout kernels of one device (see backend.h), following the convention of
// src/ops/dropout.cpp: element i takes draw offset + i of the Philox stream (seed,
// subsequence) and is kept iff philox_uniform(draw) > p; the mask is bit-packed (element i
// at bit i % 8 of byte i / 8). x, y, g, dx contiguous, f32 or f64.
#pragma once
#include <cstdint>

#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct DropoutDraws {
  uint64_t seed, subsequence, offset;
  float p;
};

struct DropoutKernels {
  void (*forward)(const Tensor& x, Tensor& y, Tensor& mask, const DropoutDraws& d, double scale);
  void (*backward)(const Tensor& g, const Tensor& mask, Tensor& dx, double scale);
};

// src/cpu/dropout.cpp, cuda/dropout.cu
LB_KERNEL_TABLES(DropoutKernels, dropout_kernels, kCpuDropout, kCudaDropout, "dropout")

}  // namespace lb::backend
