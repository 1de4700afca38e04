// Internal to the CUDA kernels: an N-d layout passed by value to a kernel (the output's shape
// and one operand's element strides; a broadcast axis has stride 0) and the offset of the
// i-th element of the output in row-major order.
#pragma once
#include <cstdint>

#include "lb/core/checks.h"
#include "lb/core/tensor.h"

namespace lb::cuda {

constexpr int kMaxDims = 8;

struct Strides {
  int nd = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
};

// t's strides broadcast to shape (t's own shape when equal).
inline Strides strides_of(const Tensor& t, const Shape& shape) {
  LB_CHECK(shape.size() <= static_cast<size_t>(kMaxDims), "CUDA kernels take tensors of up to ", kMaxDims,
           " dimensions, got ", shape.size());
  const Shape st = detail::broadcast_strides(t, shape);
  Strides s;
  s.nd = static_cast<int>(shape.size());
  for (int d = 0; d < s.nd; ++d) {
    s.shape[d] = shape[static_cast<size_t>(d)];
    s.stride[d] = st[static_cast<size_t>(d)];
  }
  return s;
}

__device__ inline int64_t offset_of(int64_t i, const Strides& s) {
  int64_t off = 0;
  for (int d = s.nd - 1; d >= 0; --d) {
    const int64_t k = i % s.shape[d];
    i /= s.shape[d];
    off += k * s.stride[d];
  }
  return off;
}

// Grid-stride loop over n elements.
#define LB_CUDA_FOR_EACH(i, n)                                                                   \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace lb::cuda
