// Internal: the layer-norm kernels of one device (see backend.h), over the last dim C of
// contiguous x viewed as (R, C) rows; weight, bias (C) may be undefined, and so may the
// outputs a caller does not want (mean/rstd when not recording; dx, dw, db in backward).
//   forward:  y = (x - mean) rstd w + b, mean and rstd (R) per row, variance biased (/C)
//   backward: dw = Σ_rows g x̂, db = Σ_rows g,
//             dx = rstd (g w - mean_j(g w) - x̂ mean_j(g w x̂)),  x̂ = (x - mean) rstd
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct LayerNormKernels {
  void (*forward)(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, Tensor& mean, Tensor& rstd,
                  double eps);
  void (*backward)(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                   Tensor& dx, Tensor& dw, Tensor& db);
};

// src/cpu/layer_norm.cpp, cuda/layer_norm.cu
LB_KERNEL_TABLES(LayerNormKernels, layer_norm_kernels, kCpuLayerNorm, kCudaLayerNorm, "layer_norm")

}  // namespace lb::backend
