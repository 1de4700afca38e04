// Internal: the ReLU kernels of one device (see backend.h) on contiguous tensors of one float
// dtype. The mask holds where x > 0, one bit per element (element i at bit i % 8 of byte
// i / 8, as dropout's): what backward needs, 1/32 of the output in f32.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct ReluKernels {
  // y = x > 0 ? x : 0 (NaN maps to 0); mask bits = x > 0
  void (*forward)(const Tensor& x, Tensor& y, Tensor& mask);
  // dx = mask ? g : 0
  void (*backward)(const Tensor& g, const Tensor& mask, Tensor& dx);
};

// src/cpu/relu.cpp, cuda/relu.cu
LB_KERNEL_TABLES(ReluKernels, relu_kernels, kCpuRelu, kCudaRelu, "relu")

}  // namespace lb::backend
