// Internal to the CPU quantisation kernels (quantize.h): the helpers the scalar references
// (quantize_ref.cpp), the AVX-512 kernels (quantize_avx512.cpp) and the AVX2 kernels
// (quantize_avx2.cpp) share, and the table of entry points each provides, which quantize.cpp
// chooses between. Included by those four files only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "src/cpu/quantize.h"

// The vector kernels are compiled on x86-64 whatever the build's -march (per-function
// targets) and chosen at run time.
#if defined(__x86_64__)
#define LB_QUANT_X86_64 1
#endif

namespace lb::cpu {

namespace quant_kernels {
// Elements below which loops stay serial (~0.1 ms of work): with more runnable threads than
// cores, every parallel region risks waiting for a preempted thread.
constexpr int64_t kParallelWork = 1 << 18;

// Output size of a convolution along one axis.
inline int64_t conv_out(int64_t n, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (n + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

inline void fwht16_scalar(float* a) { quant::fwht16_block(a); }

inline int8_t quant_one(float x, float inv, const QuantParams& p, uint64_t e) {
  return p.stochastic ? quant::quantize_sr(x, inv, p.qmax, quant::philox_draw(p.key, e))
                      : quant::quantize_rtn(x, inv, p.qmax);
}

// Input rows a convolution reads: rows[ih] for ih in [0, H).
inline std::vector<char> input_rows_read(int64_t H, int64_t kH, const Conv2dArgs& a) {
  const int64_t Ho = conv_out(H, kH, a.stride[0], a.padding[0], a.dilation[0]);
  std::vector<char> rows(static_cast<size_t>(H), 0);
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t i = 0; i < kH; ++i) {
      const int64_t ih = oh * a.stride[0] - a.padding[0] + i * a.dilation[0];
      if (ih >= 0 && ih < H) rows[static_cast<size_t>(ih)] = 1;
    }
  return rows;
}

// Row (c, i, j) of one image's im2col matrix of levels (plane = channel c): Ho·Wo bytes, zero
// where the tap reads padding.
inline void im2col_row_levels(const int8_t* plane, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t i, int64_t j,
                       const Conv2dArgs& a, int8_t* row) {
  const int64_t sw = a.stride[1], iw0 = j * a.dilation[1] - a.padding[1];
  for (int64_t oh = 0; oh < Ho; ++oh) {
    int8_t* d = row + oh * Wo;
    const int64_t ih = oh * a.stride[0] - a.padding[0] + i * a.dilation[0];
    if (ih < 0 || ih >= H) {
      std::memset(d, 0, static_cast<size_t>(Wo));
      continue;
    }
    const int8_t* src = plane + ih * W;
    if (sw == 1) {  // one run of consecutive input columns between the padding
      const int64_t lo = std::clamp<int64_t>(-iw0, 0, Wo), hi = std::clamp<int64_t>(W - iw0, lo, Wo);
      std::memset(d, 0, static_cast<size_t>(lo));
      std::memcpy(d + lo, src + iw0 + lo, static_cast<size_t>(hi - lo));
      std::memset(d + hi, 0, static_cast<size_t>(Wo - hi));
    } else {
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t iw = ow * sw + iw0;
        d[ow] = iw >= 0 && iw < W ? src[iw] : int8_t{0};
      }
    }
  }
}

// Expands a rounded table (hla_im2col_table's layout, quantize.h) into the column rows.
inline void expand_table_rows(const int8_t* qt, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                       const Conv2dArgs& a, int r, int8_t* out, int64_t ldq) {
  const int64_t Ho = conv_out(H, kH, a.stride[0], a.padding[0], a.dilation[0]);
  const int64_t run = conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]) / 16 * r;  // one output row
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < kH; ++i)
      for (int64_t j = 0; j < kW; ++j) {
        int8_t* dst = out + ((c * kH + i) * kW + j) * ldq;
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const int64_t ih = oh * a.stride[0] - a.padding[0] + i * a.dilation[0];
          if (ih < 0 || ih >= H)
            std::memset(dst + oh * run, 0, static_cast<size_t>(run));
          else
            std::memcpy(dst + oh * run, qt + ((c * kW + j) * H + ih) * run, static_cast<size_t>(run));
        }
      }
}

inline void stats_add(TensorStats& s, float v) {
  const float a = std::fabs(v);
  s.absmax = std::max(s.absmax, a);
  s.sum_sq += static_cast<double>(v) * v;
  s.sum_abs += a;
  ++s.count;
}
}  // namespace quant_kernels

// One implementation of quantize.h's dispatched kernels: the scalar references, the AVX-512
// or the AVX2 kernels. quantize.cpp chooses one table per call (the single dispatch point).
struct QuantizeImpl {
  decltype(&ref::philox_fill) philox_fill;
  decltype(&ref::fwht16_rows_absmax) fwht16_rows_absmax;
  decltype(&ref::fwht16_rows_quantize) fwht16_rows_quantize;
  decltype(&ref::fwht16_rows_quantize_per_row) fwht16_rows_quantize_per_row;
  decltype(&ref::fwht16_rows) fwht16_rows;
  decltype(&ref::fwht16_rows_keep_absmax) fwht16_rows_keep_absmax;
  decltype(&ref::fwht16_rows_keep_quantize) fwht16_rows_keep_quantize;
  decltype(&ref::hla_im2col_absmax) hla_im2col_absmax;
  decltype(&ref::hla_im2col_quantize) hla_im2col_quantize;
  decltype(&ref::hla_im2col_table) hla_im2col_table;
  decltype(&ref::hla_im2col_table_quantize) hla_im2col_table_quantize;
  decltype(&ref::fwht16_cols_stats) fwht16_cols_stats;
  decltype(&ref::fwht16_cols_quantize) fwht16_cols_quantize;
  decltype(&ref::fwht16_cols) fwht16_cols;
  decltype(&ref::fwht16_dual_quantize) fwht16_dual_quantize;
  decltype(&ref::tensor_stats) tensor_stats;
  decltype(&ref::quantize) quantize;
};
extern const QuantizeImpl kQuantizeReference;  // quantize_ref.cpp
#if LB_QUANT_X86_64
extern const QuantizeImpl kQuantizeAvx512;  // quantize_avx512.cpp
extern const QuantizeImpl kQuantizeAvx2;    // quantize_avx2.cpp
#endif

}  // namespace lb::cpu
