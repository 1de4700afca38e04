// Internal: the softmax / log_softmax kernels of one device (see backend.h), along the last
// axis of contiguous tensors of one float dtype. The mask (may be undefined) is added to x
// before the normalisation; `ms` are its strides broadcast to x's shape. A row whose every
// entry is -inf gives softmax 0 and log_softmax -inf, with zero gradient (src/ops/softmax.cpp).
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct SoftmaxKernels {
  // y = (log_)softmax(x + mask) over the last axis
  void (*forward)(const Tensor& x, const Tensor& mask, const Shape& ms, Tensor& y, bool log);
  // dz from the output y and its gradient g:
  //   softmax dz_j = y_j (g_j - Σ_k g_k y_k); log_softmax dz_j = g_j - e^{y_j} Σ_k g_k
  void (*backward)(const Tensor& g, const Tensor& y, Tensor& dz, bool log);
};

// src/cpu/softmax.cpp, cuda/softmax.cu
LB_KERNEL_TABLES(SoftmaxKernels, softmax_kernels, kCpuSoftmax, kCudaSoftmax, "softmax")

}  // namespace lb::backend
