// Internal: the loss kernels of one device (see backend.h). Tensors are contiguous, logits
// (N, C) and inputs of one float dtype, targets i64 (already validated: in [0, C) or
// ignore_index). Totals come back to the host as f64 (the loss is a host-side mean).
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct LossKernels {
  // lse (N) := log Σ_j e^{x_ij}; returns Σ over non-ignored rows of
  // (1-ε)(lse_i - x_{i,t_i}) + ε (lse_i - mean_j x_ij)
  double (*cross_entropy_forward)(const Tensor& x, const Tensor& targets, int64_t ignore_index, double eps,
                                  Tensor& lse);
  // dx_ij = coef (e^{x_ij - lse_i} - ε/C - (1-ε)[j = t_i]), 0 on ignored rows
  void (*cross_entropy_backward)(const Tensor& x, const Tensor& targets, const Tensor& lse, int64_t ignore_index,
                                 double eps, double coef, Tensor& dx);
  // Σ (a - b)² in f64
  double (*squared_error_sum)(const Tensor& a, const Tensor& b);
  // da = coef (a - b); db (may be undefined) = -da
  void (*squared_error_grad)(const Tensor& a, const Tensor& b, double coef, Tensor& da, Tensor& db);
};

// src/cpu/losses.cpp, cuda/losses.cu
LB_KERNEL_TABLES(LossKernels, loss_kernels, kCpuLosses, kCudaLosses, "losses")

}  // namespace lb::backend
