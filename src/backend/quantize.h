// Internal: HOT's quantisation kernels of one device (see backend.h), for the strategy in
// src/nn/backward/hot.cpp: 16-point Hadamard transforms fused with statistics and int8
// quantisation along either axis of a contiguous f32 matrix x (rows, cols). The contracts
// (layouts, padding, which Philox draw each element takes) are those of src/cpu/quantize.h;
// the formulas are lb/ops/quantize_formulas.h's, so both devices give the same int8 levels.
// Scalars the strategy needs on the host (absmax, statistics, errors) are returned.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"
#include "src/cpu/quantize.h"

namespace lb::backend {

struct QuantizeKernels {
  // ---- along rows (the contiguous axis, cols zero-padded to cols16) ----
  float (*rows_absmax)(const Tensor& x);
  // q (rows, cols16) = Q(H(x) · inv)
  void (*rows_quantize)(const Tensor& x, float inv, const cpu::QuantParams& p, Tensor& q);
  // per-token scales: row_scale (rows) = absmax(H(x_r)) / qmax, then quantised with them
  void (*rows_quantize_per_row)(const Tensor& x, const cpu::QuantParams& p, Tensor& q, Tensor& row_scale);
  void (*rows)(const Tensor& x, Tensor& y);  // y (rows, cols16) f32
  // ---- along columns (blocks of 16 rows), keeping keep.r outputs per block ----
  cpu::TensorStats (*cols_stats)(const Tensor& x, const cpu::HadamardKeep& keep);
  void (*cols_quantize)(const Tensor& x, const cpu::HadamardKeep& keep, float inv, const cpu::QuantParams& p,
                        Tensor& q);
  void (*cols)(const Tensor& x, const cpu::HadamardKeep& keep, Tensor& y);  // y f32
  // ---- both (HOT's g_y): per-row or per-tensor rows, per-tensor absmax columns ----
  cpu::DualScales (*dual_quantize)(const Tensor& x, const cpu::QuantParams& prow, bool per_row, Tensor& q_rows,
                                   Tensor& row_scale, const cpu::HadamardKeep& keep, const cpu::QuantParams& pcol,
                                   Tensor& q_cols);
  // ‖q · s − t‖₂ (in f64) with s = row_scale[r] when defined, else `scale`; q (rows, n) int8,
  // t (rows, n) f32: the LQS error of a quantisation.
  double (*dequantized_l2_error)(const Tensor& q, const Tensor& row_scale, float scale, const Tensor& t);
};

// src/cpu/quantize.cpp (its vector kernels), cuda/quantize.cu
LB_KERNEL_TABLES(QuantizeKernels, quantize_kernels, kCpuQuantize, kCudaQuantize, "hot quantisation")
// The CPU's scalar references (the emulation oracle), src/cpu/quantize.cpp.
extern const QuantizeKernels kCpuQuantizeReference;

}  // namespace lb::backend
