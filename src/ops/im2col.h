// Internal: convolution geometry and the per-plane im2col / col2im kernels shared by conv2d
// (which batches several images into one column matrix) and the public im2col/col2im.
#pragma once
#include <cstdint>

#include "lb/ops/conv.h"

namespace lb::detail {

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

// One channel plane x (H, W) -> kH·kW rows holding output rows [oh0, oh1), i.e. columns
// (oh − oh0)·Wo + ow; row r at cols + r·ld (ld ≥ (oh1 − oh0)·Wo lets several images share one
// column matrix side by side, and a row range keeps a tile of one image cache-sized).
template <typename T>
void im2col_plane(const T* x, const ConvGeom& g, int64_t oh0, int64_t oh1, T* cols, int64_t ld);
// The adjoint: dx (H, W) += the kH·kW rows at cols (row stride ld) scattered back.
template <typename T>
void col2im_plane(const T* cols, int64_t ld, const ConvGeom& g, int64_t oh0, int64_t oh1, T* dx);

}  // namespace lb::detail
