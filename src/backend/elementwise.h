// Internal: the elementwise kernels of one device (see backend.h). Outputs are contiguous
// and allocated by the caller on the inputs' device; inputs may have any strides, and the
// binary inputs broadcast to the output's shape. dtypes: f32, f64 (checked by the ops).
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"
#include "src/backend/elementwise_formulas.h"

namespace lb::backend {

struct ElementwiseKernels {
  // out = op(a, b)
  void (*binary)(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
  // out = op(a; s)
  void (*unary)(UnaryOp op, double s, const Tensor& a, Tensor& out);
  // out = g · op'(v; s): v is the saved input or output (derivative_of(op)); undefined for
  // a constant derivative. g and v have out's shape.
  void (*unary_grad)(UnaryOp op, double s, const Tensor& g, const Tensor& v, Tensor& out);
  // dst += alpha · src (src broadcast to dst's shape), in place
  void (*add_scaled_)(Tensor& dst, const Tensor& src, double alpha);
  // dst *= s, in place
  void (*scale_)(Tensor& dst, double s);
};

// src/cpu/elementwise.cpp, cuda/elementwise.cu
LB_KERNEL_TABLES(ElementwiseKernels, elementwise_kernels, kCpuElementwise, kCudaElementwise, "elementwise ops")

}  // namespace lb::backend
