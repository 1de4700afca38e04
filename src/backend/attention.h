// Internal: the fused attention kernels of one device (see backend.h) and the geometry the
// op (src/ops/attention.cpp) hands them. q (B, Tq, H), k and v (B, Tk, H) may be strided
// views with unit stride along H (the projections' outputs); they are f32/f64, or bf16
// copies when the device's GEMM reads bf16 as it is (GemmKernels::reads_bf16), with f32
// everywhere else. out, stats, grad and the gradients are contiguous; the mask (undefined,
// or contiguous and read through `ms`) has the float dtype of out.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct AttentionGeom {
  int64_t B, Tq, Tk, H, heads, d;
  double scale;        // 1/√d
  float p;             // dropout probability (0: no dropout)
  double keep_scale;   // 1 / (1 - p), 0 when p = 1
  Shape ms;            // mask strides broadcast to (B, heads, Tq, Tk); empty without a mask
  int64_t tile_bytes;  // bytes of keep bits per (b, h) tile (a tile's bits start on a byte)
  uint64_t seed, subsequence, offset;  // element e of (B, heads, Tq, Tk) draws offset + e
};

struct AttentionKernels {
  // out (B, Tq, H); stats (B, heads, Tq, 2): each probability row's max and 1/sum (max
  // -inf: a fully masked row); bits (tiles · tile_bytes, when p > 0): the keep bits, bit
  // e & 7 of byte e >> 3 of its tile for element e = i·Tk + j.
  void (*forward)(const AttentionGeom& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                  Tensor& out, Tensor& stats, Tensor& bits);
  // From grad (B, Tq, H): dq, dk, dv (as q, k, v, contiguous) and dmask (B, heads, Tq, Tk,
  // the scores' gradient), each undefined when not wanted. The probabilities are recomputed
  // from q, k, the mask and stats.
  void (*backward)(const AttentionGeom& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                   const Tensor& stats, const Tensor& bits, const Tensor& grad, Tensor& dq, Tensor& dk, Tensor& dv,
                   Tensor& dmask);
};

// src/cpu/attention.cpp, cuda/attention.cu
LB_KERNEL_TABLES(AttentionKernels, attention_kernels, kCpuAttention, kCudaAttention, "attention")

}  // namespace lb::backend
