// Internal: a Linear's bias kernels of one device (see backend.h): writing the bias into
// every row of the output before the GEMM adds x wᵀ to it, and the bias gradient as the sum
// of the output gradient's rows. Tensors are contiguous, f32 or f64, on one device.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct BiasKernels {
  // every row of y (rows, b.numel()) := b
  void (*fill_rows)(Tensor& y, const Tensor& b);
  // out (cols) = Σ over the rows of g (rows, cols)
  void (*column_sums)(const Tensor& g, Tensor& out);
};

// src/cpu/bias.cpp, cuda/bias.cu
LB_KERNEL_TABLES(BiasKernels, bias_kernels, kCpuBias, kCudaBias, "linear")

}  // namespace lb::backend
