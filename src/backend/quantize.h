// Internal: HOT's quantisation kernels of one device (see backend.h), for the strategy in
// src/nn/backward/hot.cpp: 16-point Hadamard transforms fused with statistics and int8
// quantisation along either axis of a contiguous f32 matrix x (rows, cols). The contracts
// (layouts, padding, which Philox draw each element takes) are those of src/cpu/quantize.h;
// the formulas are lb/core/quantize_formulas.h's, so both devices give the same int8 levels.
// Scalars the strategy needs on the host (absmax, statistics, errors) are returned.
#pragma once
#include "lb/core/tensor.h"
#include "lb/core/conv_geometry.h"
#include "src/backend/backend.h"
#include "src/backend/quantize_types.h"

namespace lb::backend {

struct QuantizeKernels {
  // ---- along rows (the contiguous axis, cols zero-padded to cols16) ----
  float (*rows_absmax)(const Tensor& x);
  // q (rows, cols16) = Q(H(x) · inv)
  void (*rows_quantize)(const Tensor& x, float inv, const QuantParams& p, Tensor& q);
  // per-token scales: row_scale (rows) = absmax(H(x_r)) / qmax, then quantised with them
  void (*rows_quantize_per_row)(const Tensor& x, const QuantParams& p, Tensor& q, Tensor& row_scale);
  void (*rows)(const Tensor& x, Tensor& y);  // y (rows, cols16) f32
  // ---- along columns (blocks of 16 rows), keeping keep.r outputs per block ----
  TensorStats (*cols_stats)(const Tensor& x, const HadamardKeep& keep);
  void (*cols_quantize)(const Tensor& x, const HadamardKeep& keep, float inv, const QuantParams& p,
                        Tensor& q);
  void (*cols)(const Tensor& x, const HadamardKeep& keep, Tensor& y);  // y f32
  // ---- both (HOT's g_y): per-row or per-tensor rows, per-tensor absmax columns ----
  DualScales (*dual_quantize)(const Tensor& x, const QuantParams& prow, bool per_row, Tensor& q_rows,
                              Tensor& row_scale, const HadamardKeep& keep, const QuantParams& pcol,
                              Tensor& q_cols);
  // ‖q · s − t‖₂ (in f64) with s = row_scale[r] when defined, else `scale`; q (rows, n) int8,
  // t (rows, n) f32: the LQS error of a quantisation.
  double (*dequantized_l2_error)(const Tensor& q, const Tensor& row_scale, float scale, const Tensor& t);
  // ---- no transform (HOT's raw conv input), any contiguous shape ----
  float (*absmax)(const Tensor& x);
  // q (x's shape, int8) = Q(x · inv); element i takes draw i
  void (*quantize)(const Tensor& x, float inv, const QuantParams& p, Tensor& q);
  void (*dequantize)(const Tensor& q, float scale, Tensor& y);  // y (q's shape) f32 = q · scale
};

// src/cpu/quantize.cpp (its vector kernels), cuda/quantize.cu
LB_KERNEL_TABLES(QuantizeKernels, quantize_kernels, kCpuQuantize, kCudaQuantize, "hot quantisation")
// The CPU's scalar references (the emulation oracle), src/cpu/quantize.cpp.
extern const QuantizeKernels kCpuQuantizeReference;

// HLA of a convolution's im2col view straight from an int8 image (src/cpu/quantize.h's
// hla_im2col_* contracts): host pointers, one image per call, serial, for HOT's per-image
// conv path, which runs on the CPU (the strategy parallelises over images).
struct HlaIm2colKernels {
  bool (*table_fits)(int64_t W, int64_t kW, const Conv2dArgs& args);
  int64_t (*table_size)(int64_t C, int64_t H, int64_t W, int64_t kW, const Conv2dArgs& args,
                        const HadamardKeep& keep);
  float (*table)(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                 const Conv2dArgs& args, const HadamardKeep& keep, float* table);
  void (*table_quantize)(const float* table, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                         const Conv2dArgs& args, const HadamardKeep& keep, float inv, int qmax, int8_t* out,
                         int64_t ldq);
  float (*absmax)(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                  const Conv2dArgs& args, const HadamardKeep& keep);
  void (*quantize)(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                   const Conv2dArgs& args, const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* out,
                   int64_t ldq);
};
// src/cpu/quantize.cpp
extern const HlaIm2colKernels kCpuHlaIm2col;

}  // namespace lb::backend
