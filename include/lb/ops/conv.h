// Convolution and pooling on NCHW tensors (f32/f64), differentiable. Conv2d is im2col + GEMM,
// or Winograd F(2×2, 3×3) for 3×3 stride-1 convolutions with enough channels (src/cpu/
// winograd_conv.h; LEANBACK_CONV_ALGO=im2col|winograd|auto); its backward is split into data
// (grad_input) and filter (grad_weight, grad_bias) parts.
#pragma once
#include <array>

#include "lb/core/conv_geometry.h"
#include "lb/core/tensor.h"

namespace lb {

// x (N, C_in, H, W), w (C_out, C_in/groups, kH, kW), b (C_out) or undefined.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(),
              const Conv2dArgs& args = {});

// The exact gradients of y = conv2d(x, w, b, args) for grad_output (N, C_out, H_out, W_out):
// the op's own backward (Winograd or im2col + GEMM), for callers that keep x and w themselves
// (the vanilla backward strategy). Only the wanted ones are defined; no tape is recorded.
struct Conv2dGrads {
  Tensor grad_input, grad_weight, grad_bias;
};
Conv2dGrads conv2d_grads(const Tensor& grad_output, const Tensor& x, const Tensor& w,
                         const Conv2dArgs& args, bool want_input, bool want_weight,
                         bool want_bias);

// im2col for one image group: x (C, H, W) -> columns (C·kH·kW, H_out·W_out). Exposed because
// the backward strategies work on this GEMM view of a convolution (CPU kernels,
// src/cpu/im2col.cpp).
void im2col(const float* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, float* cols);
void col2im(const float* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, float* dx);  // accumulates into dx
// f64 twins (gradient checks).
void im2col(const double* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, double* cols);
void col2im(const double* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, double* dx);

Tensor max_pool2d(const Tensor& x, const Pool2dArgs& args);
// Average pool; padded cells count in the divisor (PyTorch count_include_pad=True).
Tensor avg_pool2d(const Tensor& x, const Pool2dArgs& args);
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);

}  // namespace lb
