// im2col / col2im: the GEMM view of a convolution. Row (c, i, j) of the column matrix holds,
// for every output position (oh, ow), the input x[c, oh·sh − ph + i·dh, ow·sw − pw + j·dw]
// (0 in the padding). Each row is written as Ho segments of Wo, read from a zero-padded copy
// of the plane, so the inner loop is a plain unclipped copy (col2im likewise accumulates
// into a padded plane and adds its interior back).
#include "src/cpu/im2col.h"

#include <algorithm>
#include <vector>

#include "lb/core/error.h"

namespace lb {

namespace detail {

namespace {
// Copies n elements with stride `step` on the source. A plain vector loop, inlined: the
// segments are short (one output row), where a memcpy call costs more than the copy (the simd
// pragma also keeps GCC from turning the loop into one).
template <typename T>
inline void copy_row(const T* __restrict src, int64_t step, int64_t n, T* __restrict dst) {
  if (step == 1)
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) dst[k] = src[k];
  else
    for (int64_t k = 0; k < n; ++k) dst[k] = src[k * step];
}
template <typename T>
inline void add_row(const T* __restrict src, int64_t step, int64_t n, T* __restrict dst) {
  if (step == 1)
    for (int64_t k = 0; k < n; ++k) dst[k] += src[k];
  else
    for (int64_t k = 0; k < n; ++k) dst[k * step] += src[k];
}

// Per-thread scratch for a zero-padded plane: with the padding materialised, every output
// row maps to a full, unclipped input segment, so the inner loops have no bounds.
template <typename T>
T* pad_scratch(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// The kH·kW column rows of one plane from its padded copy xp (row stride Wp, padded row r at
// xp + (r − base)·Wp). With kWo > 0 the output width is kWo and the stride 1 at compile
// time: the small planes of deep layers, where loop overhead would swamp 4–32 element copies.
template <int kWo, typename T>
void im2col_rows(const T* xp, int64_t Wp, int64_t base, const ConvGeom& g, int64_t oh0,
                 int64_t oh1, T* cols, int64_t ld) {
  const int64_t Wo = kWo > 0 ? kWo : g.Wo, sw = kWo > 0 ? 1 : g.sw;
  for (int64_t i = 0; i < g.kH; ++i)
    for (int64_t j = 0; j < g.kW; ++j) {
      T* row = cols + (i * g.kW + j) * ld;
      const T* src = xp + (oh0 * g.sh + i * g.dh - base) * Wp + j * g.dw;
      for (int64_t oh = oh0; oh < oh1; ++oh, src += g.sh * Wp, row += Wo) copy_row(src, sw, Wo, row);
    }
}
// The adjoint: the padded plane dp (same addressing) += the kH·kW rows.
template <int kWo, typename T>
void col2im_rows(const T* cols, int64_t ld, const ConvGeom& g, int64_t oh0, int64_t oh1, T* dp,
                 int64_t Wp, int64_t base) {
  const int64_t Wo = kWo > 0 ? kWo : g.Wo, sw = kWo > 0 ? 1 : g.sw;
  for (int64_t i = 0; i < g.kH; ++i)
    for (int64_t j = 0; j < g.kW; ++j) {
      const T* row = cols + (i * g.kW + j) * ld;
      T* dst = dp + (oh0 * g.sh + i * g.dh - base) * Wp + j * g.dw;
      for (int64_t oh = oh0; oh < oh1; ++oh, dst += g.sh * Wp, row += Wo) add_row(row, sw, Wo, dst);
    }
}
// Calls f.template operator()<kWo, kWi>() with kWo = Wo for common small stride-1 widths
// (else 0) and kWi = W when it equals that width (the "same" convolution; else 0).
template <typename F>
void dispatch_width(const ConvGeom& g, F&& f) {
  if (g.sw == 1) {
    switch (g.Wo) {
#define LB_WIDTH_CASE(n) \
  case n: return g.W == n ? f.template operator()<n, n>() : f.template operator()<n, 0>();
      LB_WIDTH_CASE(4)
      LB_WIDTH_CASE(8)
      LB_WIDTH_CASE(16)
      LB_WIDTH_CASE(32)
#undef LB_WIDTH_CASE
      default: break;
    }
  }
  f.template operator()<0, 0>();
}

// Rows of the padded plane that output rows [oh0, oh1) read: [r0, r1).
inline void padded_rows(const ConvGeom& g, int64_t oh0, int64_t oh1, int64_t& r0, int64_t& r1) {
  r0 = oh0 * g.sh;
  r1 = (oh1 - 1) * g.sh + (g.kH - 1) * g.dh + 1;
}
}  // namespace

// Plane kernels with the widths of dispatch_width (0 = read from g at run time).
template <int kWo, int kWi, typename T>
void im2col_plane_impl(const T* x, const ConvGeom& g, int64_t oh0, int64_t oh1, T* cols,
                       int64_t ld) {
  const int64_t W = kWi > 0 ? kWi : g.W;
  // xp: the padded plane (rows r0..r1 of it), row stride Wp; or x itself without padding.
  const T* xp = x;
  int64_t Wp = W, r0, r1, base = 0;  // padded row r lives at xp + (r − base)·Wp
  padded_rows(g, oh0, oh1, r0, r1);
  if (g.ph > 0 || g.pw > 0) {
    Wp = W + 2 * g.pw;
    T* buf = pad_scratch<T>((r1 - r0) * Wp);
    for (int64_t r = r0; r < r1; ++r) {
      T* dst = buf + (r - r0) * Wp;
      const int64_t ih = r - g.ph;
      if (ih < 0 || ih >= g.H) {
        std::fill(dst, dst + Wp, T(0));
        continue;
      }
      std::fill(dst, dst + g.pw, T(0));
      copy_row(x + ih * W, 1, W, dst + g.pw);
      std::fill(dst + g.pw + W, dst + Wp, T(0));
    }
    xp = buf;
    base = r0;
  }
  im2col_rows<kWo>(xp, Wp, base, g, oh0, oh1, cols, ld);
}

template <int kWo, int kWi, typename T>
void col2im_plane_impl(const T* cols, int64_t ld, const ConvGeom& g, int64_t oh0, int64_t oh1,
                       T* dx) {
  const int64_t W = kWi > 0 ? kWi : g.W;
  int64_t r0, r1;
  padded_rows(g, oh0, oh1, r0, r1);
  const bool padded = g.ph > 0 || g.pw > 0;
  const int64_t Wp = W + 2 * g.pw;
  // Accumulate into the padded plane (zeroed rows r0..r1), then add its interior to dx.
  T* dp = dx;
  int64_t base = 0;  // padded row r lives at dp + (r − base)·Wp
  if (padded) {
    dp = pad_scratch<T>((r1 - r0) * Wp);
    const int64_t n = (r1 - r0) * Wp;
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) dp[k] = T(0);  // inline: a memset call costs more here
    base = r0;
  }
  col2im_rows<kWo>(cols, ld, g, oh0, oh1, dp, Wp, base);
  if (padded)
    for (int64_t r = std::max(r0, g.ph); r < std::min(r1, g.ph + g.H); ++r)
      add_row(dp + (r - base) * Wp + g.pw, 1, W, dx + (r - g.ph) * W);
}

template <typename T>
void im2col_plane(const T* x, const ConvGeom& g, int64_t oh0, int64_t oh1, T* cols, int64_t ld) {
  dispatch_width(g, [&]<int kWo, int kWi>() {
    im2col_plane_impl<kWo, kWi>(x, g, oh0, oh1, cols, ld);
  });
}

template <typename T>
void col2im_plane(const T* cols, int64_t ld, const ConvGeom& g, int64_t oh0, int64_t oh1, T* dx) {
  dispatch_width(g, [&]<int kWo, int kWi>() {
    col2im_plane_impl<kWo, kWi>(cols, ld, g, oh0, oh1, dx);
  });
}

template void im2col_plane<float>(const float*, const ConvGeom&, int64_t, int64_t, float*, int64_t);
template void im2col_plane<double>(const double*, const ConvGeom&, int64_t, int64_t, double*,
                                   int64_t);
template void col2im_plane<float>(const float*, int64_t, const ConvGeom&, int64_t, int64_t, float*);
template void col2im_plane<double>(const double*, int64_t, const ConvGeom&, int64_t, int64_t,
                                   double*);

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
  for (int64_t c = 0; c < C; ++c) detail::im2col_plane(x + c * H * W, g, 0, g.Ho, cols + c * kH * kW * P, P);
}

template <typename T>
void col2im_impl(const T* cols, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                 const Conv2dArgs& args, T* dx) {
  const detail::ConvGeom g = detail::conv_geom(H, W, kH, kW, args, "col2im");
  const int64_t P = g.Ho * g.Wo;
#pragma omp parallel for if (C * kH * kW * P > kParallelMin) schedule(static)
  for (int64_t c = 0; c < C; ++c) detail::col2im_plane(cols + c * kH * kW * P, P, g, 0, g.Ho, dx + c * H * W);
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
