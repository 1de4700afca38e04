// Internal: the 2-D pooling kernels of one device (see backend.h) on contiguous NCHW planes
// of one float dtype, and the window formulas both devices use.
#pragma once
#include "lb/core/host_device.h"
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

// planes = N·C input planes of H×W, kernel kH×kW, stride (sh, sw), padding (ph, pw),
// output Ho×Wo (the adaptive pool sets only H, W, Ho, Wo).
struct PoolGeom {
  int64_t planes, H, W, kH, kW, sh, sw, ph, pw, Ho, Wo;
};

// The average pools: avg_pool2d (count_include_pad: the divisor is always the kernel area,
// since padding ≤ kernel/2 and floor output sizes keep windows inside the padding) and
// adaptive_avg_pool2d (PyTorch's windows start = floor(i·H/out), end = ceil((i+1)·H/out),
// which may overlap; the divisor is the window's size).
enum class AvgPool : uint8_t { kFixed, kAdaptive };

// Rows [*h0, *h1) of output row oh (columns: the same with W, Wo, kW, sw, pw).
LB_HD inline void avg_window(AvgPool mode, int64_t o, int64_t in, int64_t out, int64_t k, int64_t s, int64_t p,
                             int64_t* lo, int64_t* hi) {
  if (mode == AvgPool::kAdaptive) {
    *lo = o * in / out;
    *hi = ((o + 1) * in + out - 1) / out;
  } else {
    const int64_t start = o * s - p;
    *lo = start < 0 ? 0 : start;
    *hi = start + k < in ? start + k : in;
  }
}

struct Pool2dKernels {
  // y = max over each window; idx (u8 for windows of at most 256 cells: the window position
  // i·kW + j; else i32: the plane index ih·W + iw) of the first maximum, NaN winning.
  void (*max_forward)(const PoolGeom& g, const Tensor& x, Tensor& y, Tensor& idx);
  // dx (all of it written) from dy through the saved idx
  void (*max_backward)(const PoolGeom& g, const Tensor& dy, const Tensor& idx, Tensor& dx);
  void (*avg_forward)(const PoolGeom& g, AvgPool mode, const Tensor& x, Tensor& y);
  // dx (all of it written): each output's dy / divisor spread over its window
  void (*avg_backward)(const PoolGeom& g, AvgPool mode, const Tensor& dy, Tensor& dx);
};

// src/cpu/pool2d.cpp, cuda/pool2d.cu
LB_KERNEL_TABLES(Pool2dKernels, pool2d_kernels, kCpuPool2d, kCudaPool2d, "pooling")

}  // namespace lb::backend
