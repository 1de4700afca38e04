// Internal: the conv2d kernels of one device (see backend.h). x (N, C, H, W), w (Co, C/G,
// kH, kW), b (Co) and the gradients are contiguous, of one float dtype; the arguments are
// already checked (src/ops/conv2d.cpp) and g is their geometry.
#pragma once
#include "lb/core/conv_geometry.h"
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct Conv2dKernels {
  // y (N, Co, Ho, Wo) = conv(x, w) + b (b may be undefined)
  void (*forward)(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args,
                  const detail::ConvGeom& g, Tensor& y);
  // From dy (N, Co, Ho, Wo): dx (reads w), dw (reads x), db, each overwritten; undefined
  // when not wanted (x or w is then undefined too when nothing reads it). xs and ws are the
  // shapes of x and w.
  void (*backward)(const Tensor& dy, const Tensor& x, const Tensor& w, const Shape& xs, const Shape& ws,
                   const Conv2dArgs& args, const detail::ConvGeom& g, Tensor& dx, Tensor& dw, Tensor& db);
};

// src/cpu/conv2d.cpp, cuda/conv2d.cu
LB_KERNEL_TABLES(Conv2dKernels, conv2d_kernels, kCpuConv2d, kCudaConv2d, "conv2d")

}  // namespace lb::backend
