// Internal: the copy and fill kernels of one device (see backend.h), behind Tensor::copy_
// and Tensor::fill_ (src/core/tensor.cpp keeps the shape checks, broadcasting and moves
// between devices). Any strides and, for copy, any pair of dtypes.
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

extern const CopyKernels kCpuCopy;  // src/cpu/copy.cpp
#if defined(LEANBACK_WITH_CUDA)
extern const CopyKernels kCudaCopy;  // cuda/copy.cu
#endif

inline const CopyKernels& copy_kernels(Device d) {
#if defined(LEANBACK_WITH_CUDA)
  return kernels_for(d, kCpuCopy, &kCudaCopy, "copies and fills");
#else
  return kernels_for<CopyKernels>(d, kCpuCopy, nullptr, "copies and fills");
#endif
}

}  // namespace lb::backend
