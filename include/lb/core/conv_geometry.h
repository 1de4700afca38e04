// The arguments and shapes of a 2-d convolution or pooling (NCHW): plain data and the output
// size formula, shared by the ops (lb/ops/conv.h), the backend's kernels and the backward
// strategies, so it sits at the bottom layer.
#pragma once
#include <array>
#include <cstdint>

#include "lb/core/tensor.h"

namespace lb {

struct Conv2dArgs {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

// A Conv2d call seen as a GEMM: x (N, C, H, W) -> tokens (B = N, L = Ho·Wo, I = C·kH·kW)
// by im2col (1×1 stride-1 unpadded: a plain transpose), w (O, C, kH, kW) -> (O, I). The
// backward strategies work on this view (lb/nn/backward/strategy.h); it lives in core because
// the backend's token-view kernels (src/backend/conv_tokens.h) take it.
struct ConvGeometry {
  Shape x_shape;  // (N, C, H, W)
  int64_t kH = 1, kW = 1, Ho = 1, Wo = 1;
  Conv2dArgs args;
};

struct Pool2dArgs {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{2, 2};
  std::array<int64_t, 2> padding{0, 0};
};

namespace detail {

// Sizes of one convolution plane: input (H, W), kernel (kH, kW), output (Ho, Wo).
struct ConvGeom {
  int64_t H, W, kH, kW;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t Ho, Wo;
};
// Output size per PyTorch: Ho = (H + 2·ph − dh·(kH−1) − 1) / sh + 1. Throws lb::Error (naming
// `op` and the sizes) on non-positive stride/dilation, negative padding or a kernel larger
// than the padded input.
ConvGeom conv_geom(int64_t H, int64_t W, int64_t kH, int64_t kW, const Conv2dArgs& args,
                   const char* op);

}  // namespace detail

}  // namespace lb
