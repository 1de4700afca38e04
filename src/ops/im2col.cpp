// im2col / col2im: the GEMM view of a convolution. Row (c, i, j) of the column matrix holds,
// for every output position (oh, ow), the input x[c, oh·sh − ph + i·dh, ow·sw − pw + j·dw]
// (0 in the padding). Each row is written as Ho segments of Wo: the in-bounds ow range is
// computed once per row, so the inner loop is a plain copy (a memcpy when sw = 1).
#include "src/ops/im2col.h"

#include <algorithm>
#include <cstring>

#include "lb/core/error.h"

namespace lb {

namespace detail {

ConvGeom conv_geom(int64_t H, int64_t W, int64_t kH, int64_t kW, const Conv2dArgs& a,
                   const char* op) {
  LB_CHECK(a.stride[0] > 0 && a.stride[1] > 0, op, ": stride must be positive, got (",
           a.stride[0], ", ", a.stride[1], ")");
  LB_CHECK(a.dilation[0] > 0 && a.dilation[1] > 0, op, ": dilation must be positive, got (",
           a.dilation[0], ", ", a.dilation[1], ")");
  LB_CHECK(a.padding[0] >= 0 && a.padding[1] >= 0, op, ": padding must be non-negative, got (",
           a.padding[0], ", ", a.padding[1], ")");
  LB_CHECK(kH > 0 && kW > 0, op, ": kernel size must be positive, got (", kH, ", ", kW, ")");
  ConvGeom g{H, W, kH, kW, a.stride[0], a.stride[1], a.padding[0], a.padding[1],
             a.dilation[0], a.dilation[1], 0, 0};
  const int64_t ekH = g.dh * (kH - 1) + 1, ekW = g.dw * (kW - 1) + 1;  // dilated extent
  LB_CHECK(H + 2 * g.ph >= ekH && W + 2 * g.pw >= ekW, op, ": kernel (", kH, ", ", kW,
           ") with dilation (", g.dh, ", ", g.dw, ") spans (", ekH, ", ", ekW,
           "), larger than the padded input (", H + 2 * g.ph, ", ", W + 2 * g.pw,
           ") from input (", H, ", ", W, ") and padding (", g.ph, ", ", g.pw, ")");
  g.Ho = (H + 2 * g.ph - ekH) / g.sh + 1;
  g.Wo = (W + 2 * g.pw - ekW) / g.sw + 1;
  return g;
}

namespace {
// The ow range [lo, hi) whose input column ow·sw + off lies inside [0, W).
inline void valid_range(int64_t off, int64_t sw, int64_t W, int64_t Wo, int64_t& lo,
                        int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
  hi = W - 1 - off < 0 ? 0 : std::min(Wo, (W - 1 - off) / sw + 1);
  lo = std::min(lo, hi);
}
}  // namespace

template <typename T>
void im2col_plane(const T* x, const ConvGeom& g, T* cols, int64_t ld) {
  for (int64_t i = 0; i < g.kH; ++i) {
    for (int64_t j = 0; j < g.kW; ++j) {
      T* row = cols + (i * g.kW + j) * ld;
      const int64_t woff = j * g.dw - g.pw;
      int64_t lo, hi;
      valid_range(woff, g.sw, g.W, g.Wo, lo, hi);
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        T* out = row + oh * g.Wo;
        const int64_t ih = oh * g.sh - g.ph + i * g.dh;
        if (ih < 0 || ih >= g.H) {
          std::fill(out, out + g.Wo, T(0));
          continue;
        }
        const T* src = x + ih * g.W + lo * g.sw + woff;  // input of ow = lo
        std::fill(out, out + lo, T(0));
        if (g.sw == 1) {
          if (hi > lo) std::memcpy(out + lo, src, (hi - lo) * sizeof(T));
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) out[ow] = src[(ow - lo) * g.sw];
        }
        std::fill(out + hi, out + g.Wo, T(0));
      }
    }
  }
}

template <typename T>
void col2im_plane(const T* cols, int64_t ld, const ConvGeom& g, T* dx) {
  for (int64_t i = 0; i < g.kH; ++i) {
    for (int64_t j = 0; j < g.kW; ++j) {
      const T* row = cols + (i * g.kW + j) * ld;
      const int64_t woff = j * g.dw - g.pw;
      int64_t lo, hi;
      valid_range(woff, g.sw, g.W, g.Wo, lo, hi);
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const int64_t ih = oh * g.sh - g.ph + i * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        const T* in = row + oh * g.Wo;
        T* dst = dx + ih * g.W + lo * g.sw + woff;  // input of ow = lo
        if (g.sw == 1) {
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow - lo] += in[ow];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) dst[(ow - lo) * g.sw] += in[ow];
        }
      }
    }
  }
}

template void im2col_plane<float>(const float*, const ConvGeom&, float*, int64_t);
template void im2col_plane<double>(const double*, const ConvGeom&, double*, int64_t);
template void col2im_plane<float>(const float*, int64_t, const ConvGeom&, float*);
template void col2im_plane<double>(const double*, int64_t, const ConvGeom&, double*);

}  // namespace detail

namespace {
// Channels are independent planes (distinct rows of cols, distinct planes of dx), so both
// directions split over channels without races.
constexpr int64_t kParallelMin = 1 << 15;

template <typename T>
void im2col_impl(const T* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                 const Conv2dArgs& args, T* cols) {
  const detail::ConvGeom g = detail::conv_geom(H, W, kH, kW, args, "im2col");
  const int64_t P = g.Ho * g.Wo;
#pragma omp parallel for if (C * kH * kW * P > kParallelMin) schedule(static)
  for (int64_t c = 0; c < C; ++c) detail::im2col_plane(x + c * H * W, g, cols + c * kH * kW * P, P);
}

template <typename T>
void col2im_impl(const T* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                 const Conv2dArgs& args, T* dx) {
  const detail::ConvGeom g = detail::conv_geom(H, W, kH, kW, args, "col2im");
  const int64_t P = g.Ho * g.Wo;
#pragma omp parallel for if (C * kH * kW * P > kParallelMin) schedule(static)
  for (int64_t c = 0; c < C; ++c) detail::col2im_plane(cols + c * kH * kW * P, P, g, dx + c * H * W);
}
}  // namespace

void im2col(const float* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, float* cols) {
  im2col_impl(x, C, H, W, kH, kW, args, cols);
}
void im2col(const double* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, double* cols) {
  im2col_impl(x, C, H, W, kH, kW, args, cols);
}
void col2im(const float* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, float* dx) {
  col2im_impl(cols, C, H, W, kH, kW, args, dx);
}
void col2im(const double* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
            const Conv2dArgs& args, double* dx) {
  col2im_impl(cols, C, H, W, kH, kW, args, dx);
}

}  // namespace lb
