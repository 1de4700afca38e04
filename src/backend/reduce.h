// Internal: the reduction kernels of one device (see backend.h). Outputs have the keepdim
// shape, are contiguous and allocated by the caller on x's device; x may have any strides.
#pragma once
#include <vector>

#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct ReduceKernels {
  // out = Σ of x over dims (sorted, distinct)
  void (*sum)(const Tensor& x, const std::vector<int64_t>& dims, Tensor& out);
  // values, indices (i64) = the first maximum of x along dim (NaN counts as the maximum)
  void (*max)(const Tensor& x, int64_t dim, Tensor& values, Tensor& indices);
  // gx (zeros, contiguous, x's shape) [at each index along dim] += g (keepdim shape)
  void (*max_backward)(const Tensor& g, const Tensor& indices, int64_t dim, Tensor& gx);
};

// src/cpu/reduce.cpp, cuda/reduce.cu
LB_KERNEL_TABLES(ReduceKernels, reduce_kernels, kCpuReduce, kCudaReduce, "reductions")

}  // namespace lb::backend
