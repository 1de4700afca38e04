// Internal: 3×3 stride-1 convolution by Winograd F(2×2, 3×3) (Lavin & Gray 2016), forward,
// data gradient and filter gradient on raw NCHW pointers. conv2d dispatches here for the
// shapes use_winograd() accepts; everything else stays im2col + GEMM.
#pragma once
#include <cstdint>

#include "lb/core/tensor.h"
#include "lb/core/conv_geometry.h"

namespace lb::detail {

// Which algorithm conv2d uses for the convolutions Winograd can do. Auto: Winograd where it
// is measured faster (use_winograd). The process-wide default comes from the environment,
// LEANBACK_CONV_ALGO=auto|im2col|winograd, read once; tests and benchmarks may override it.
enum class ConvAlgo { Auto, Im2col, Winograd };
ConvAlgo conv_algo();
void set_conv_algo(ConvAlgo algo);

// How the transforms lay out a chunk's tiles: Rows (tiles along image rows, vectorised along
// the width) or Channels (images transposed to NHWC, vectorised along the channels; for
// small images). Auto picks by image width; tests force each to compare them.
enum class WinogradLayout { Auto, Rows, Channels };
WinogradLayout winograd_layout();
void set_winograd_layout(WinogradLayout layout);

// x (N, C, H, W), w (Co, C, 3, 3), padding (ph, pw), y (N, Co, Ho, Wo), Ho = H + 2·ph − 2.
struct WinogradShape {
  int64_t N, C, Co, H, W, ph, pw, Ho, Wo;
};

// The convolution is one Winograd computes: 3×3 kernel, stride 1, dilation 1, groups 1, a
// non-empty input and output. Any padding works (padding reads are zeros).
bool winograd_applies(const Shape& xs, const Shape& ws, const Conv2dArgs& args);
// conv2d's choice: winograd_applies and, under ConvAlgo::Auto, enough channels for it to win.
bool use_winograd(const Shape& xs, const Shape& ws, const Conv2dArgs& args);
WinogradShape winograd_shape(const Shape& xs, const Shape& ws, const Conv2dArgs& args);

// y = conv(x, w) + b (b may be null). All pointers contiguous NCHW / (Co, C, 3, 3).
template <typename T>
void winograd_conv_forward(const WinogradShape& s, const T* x, const T* w, const T* b, T* y);
// Given dy (N, Co, Ho, Wo): dx (N, C, H, W) and dw (Co, C, 3, 3), each overwritten, or null
// when not wanted (then x, resp. w, may be null too: dx needs w, dw needs x).
template <typename T>
void winograd_conv_backward(const WinogradShape& s, const T* dy, const T* x, const T* w, T* dx,
                            T* dw);

}  // namespace lb::detail
