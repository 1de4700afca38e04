// Internal: the batch-norm kernels of one device (see backend.h). x, y, g, dx are contiguous
// (N, C, S) of one float dtype T; the per-channel vectors are contiguous of length C (T,
// except the variance: f64). The per-channel folding between them (rstd, scale, shift, the
// running statistics) is a handful of C-sized tensor ops in src/ops/batch_norm.cpp.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct BatchNormKernels {
  // Per channel over its N·S values: mean (T) and biased variance (f64), two passes.
  void (*stats)(const Tensor& x, int64_t N, int64_t C, int64_t S, Tensor& mean, Tensor& var);
  // y = x scale[c] + shift[c]
  void (*apply)(const Tensor& x, const Tensor& scale, const Tensor& shift, Tensor& y, int64_t N, int64_t C,
                int64_t S);
  // With x̂ = (x - mean) rstd, per channel: dw = Σ g x̂, db = Σ g; dx = w rstd (g - db/M - x̂ dw/M)
  // when training (the statistics depend on x), w rstd g in eval. w, dx, dw, db may be
  // undefined (no weight; gradient not wanted).
  void (*backward)(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                   bool training, Tensor& dx, Tensor& dw, Tensor& db, int64_t N, int64_t C, int64_t S);
};

// src/cpu/batch_norm.cpp, cuda/batch_norm.cu
LB_KERNEL_TABLES(BatchNormKernels, batch_norm_kernels, kCpuBatchNorm, kCudaBatchNorm, "batch_norm")

}  // namespace lb::backend
