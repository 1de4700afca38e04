// Internal: the token (GEMM) view of a convolution for the backward strategies, per device
// (see backend.h): x (N, C, H, W) -> tokens (N, L = Ho·Wo, I = C·kH·kW) (im2col, transposed),
// its adjoint (col2im: overlaps summed), and the (B, R, C) -> (B, C, R) transpose the
// strategies move g_y and g_x with. The CPU table (src/cpu/conv_tokens.cpp) runs tiled
// loops; the CUDA one (cuda/conv_tokens.cpp) the generic versions below: a gather by a
// precomputed index map (index_select's kernel), its scatter-add (index_select's backward
// kernel), and a strided copy — so the CPU tests check them against the CPU loops.
#pragma once
#include "lb/core/tensor.h"
#include "lb/core/conv_geometry.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct ConvTokenKernels {
  Tensor (*to_tokens)(const Tensor& x, const ConvGeometry& cg);
  Tensor (*from_tokens)(const Tensor& tokens, const ConvGeometry& cg);
  Tensor (*transpose_last2)(const Tensor& t);
};

// src/cpu/conv_tokens.cpp, cuda/conv_tokens.cpp
LB_KERNEL_TABLES(ConvTokenKernels, conv_token_tables, kCpuConvTokens, kCudaConvTokens, "conv token view")

// Tests only: while set, CPU tensors take the generic versions (src/backend/conv_tokens_generic.cpp).
void set_generic_conv_tokens_on_cpu(bool on);
bool generic_conv_tokens_on_cpu();
extern const ConvTokenKernels kGenericConvTokens;
inline const ConvTokenKernels& conv_token_kernels(Device d) {
  return d.is_cpu() && generic_conv_tokens_on_cpu() ? kGenericConvTokens : conv_token_tables(d);
}

namespace generic_conv_tokens {
Tensor to_tokens(const Tensor& x, const ConvGeometry& cg);
Tensor from_tokens(const Tensor& tokens, const ConvGeometry& cg);
Tensor transpose_last2(const Tensor& t);
}  // namespace generic_conv_tokens

}  // namespace lb::backend
