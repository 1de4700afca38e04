// Internal: the copy and fill kernels of one device (see backend.h), behind Tensor::copy_
// and Tensor::fill_ (src/backend/tensor_data.cpp keeps the shape checks, broadcasting and
// moves between devices). Any strides and, for copy, any pair of dtypes.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct CopyKernels {
  // dst = src, elementwise: src has dst's shape (expanded views allowed) and device.
  void (*copy)(Tensor& dst, const Tensor& src);
  // every element of dst = value (converted to its dtype)
  void (*fill)(Tensor& dst, double value);
};

// src/cpu/copy.cpp, cuda/copy.cu
LB_KERNEL_TABLES(CopyKernels, copy_kernels, kCpuCopy, kCudaCopy, "copies and fills")

// Copies for the kernels' plumbing, recording nothing on the tape (Tensor::contiguous,
// reshape and to(DType) are the differentiable ones): t itself where nothing has to change.
Tensor contiguous(const Tensor& t);
Tensor reshape(const Tensor& t, const Shape& shape);  // a view where the layout allows
Tensor to_dtype(const Tensor& t, DType dtype);

}  // namespace lb::backend
