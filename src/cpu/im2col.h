// Internal: the per-plane im2col / col2im kernels shared by conv2d
// (which batches several images into one column matrix) and the public im2col/col2im.
#pragma once
#include <cstdint>

#include "lb/core/conv_geometry.h"

namespace lb::detail {

// One channel plane x (H, W) -> kH·kW rows holding output rows [oh0, oh1), i.e. columns
// (oh − oh0)·Wo + ow; row r at cols + r·ld (ld ≥ (oh1 − oh0)·Wo lets several images share one
// column matrix side by side, and a row range keeps a tile of one image cache-sized).
template <typename T>
void im2col_plane(const T* x, const ConvGeom& g, int64_t oh0, int64_t oh1, T* cols, int64_t ld);
// The adjoint: dx (H, W) += the kH·kW rows at cols (row stride ld) scattered back.
template <typename T>
void col2im_plane(const T* cols, int64_t ld, const ConvGeom& g, int64_t oh0, int64_t oh1, T* dx);

}  // namespace lb::detail

namespace lb {
// One image (C, H, W) <-> its columns (C·kH·kW, Ho·Wo), for the backend's own callers; the
// same functions lb/ops/conv.h declares for everyone above.
void im2col(const float* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, const Conv2dArgs& args,
            float* cols);
void im2col(const double* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, const Conv2dArgs& args,
            double* cols);
void col2im(const float* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, const Conv2dArgs& args,
            float* dx);
void col2im(const double* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, const Conv2dArgs& args,
            double* dx);
}  // namespace lb
