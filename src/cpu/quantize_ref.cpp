// The scalar references of the CPU quantisation kernels (quantize.h's lb::cpu::ref): plain
// loops over the formulas of lb/core/quantize_formulas.h, the emulation oracle of the HOT
// strategy and what the AVX-512 kernels (quantize_avx512.cpp) are tested against bit for bit.
#include <omp.h>

#include "src/cpu/im2col.h"
#include "src/cpu/quantize_kernels.h"

namespace lb::cpu {

using namespace quant_kernels;

// ============================== scalar references ==============================
namespace ref {

void philox_fill(const PhiloxKey& key, uint64_t e0, int64_t n, uint32_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = quant::philox_draw(key, e0 + static_cast<uint64_t>(i));
}

float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         float* row_absmax) {
  float m = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    float rm = 0.f;
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      for (float v : a) rm = std::max(rm, std::fabs(v));
    }
    if (row_absmax) row_absmax[r] = rm;
    m = std::max(m, rm);
  }
  return m;
}

void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q) {
  const int64_t c16 = round_up16(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float ir = row_inv ? row_inv[r] : inv;
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      for (int j = 0; j < 16; ++j) {
        const int64_t e = r * c16 + c0 + j;
        q[e] = quant_one(a[j], ir, p, static_cast<uint64_t>(e));
      }
    }
  }
}

void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale) {
  std::vector<float> inv(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    float m;
    ref::fwht16_rows_absmax(x + r * ldx, 1, cols, ldx, &m);
    row_scale[r] = quant::scale_from_absmax(m, p.qmax);
    inv[static_cast<size_t>(r)] = quant::inv_scale_from_absmax(m, p.qmax);
  }
  ref::fwht16_rows_quantize(x, rows, cols, ldx, inv.data(), 0.f, p, q);
}

void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y) {
  const int64_t c16 = round_up16(cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      std::memcpy(y + r * c16 + c0, a, sizeof a);
    }
}

float fwht16_rows_keep_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  float m = 0.f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      for (int j = 0; j < keep.r; ++j) m = std::max(m, std::fabs(a[keep.idx[j]]));
    }
  return m;
}

void fwht16_rows_keep_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                               const HadamardKeep& keep, float inv, const QuantParams& p,
                               int8_t* q, int64_t ldq) {
  const int64_t width = (cols + 15) / 16 * keep.r;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      for (int j = 0; j < keep.r; ++j) {
        const int64_t oc = c0 / 16 * keep.r + j;
        q[r * ldq + oc] = quant_one(a[keep.idx[j]], inv, p, static_cast<uint64_t>(r * width + oc));
      }
    }
}

namespace {
// The dequantised im2col columns of one image (reference path).
std::vector<float> dequantized_cols(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                                    int64_t kW, const Conv2dArgs& a) {
  std::vector<float> img(static_cast<size_t>(C * H * W));
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<float>(q[i]) * s;
  const int64_t L = conv_out(H, kH, a.stride[0], a.padding[0], a.dilation[0]) *
                    conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]);
  std::vector<float> cols(static_cast<size_t>(C * kH * kW * L));
  im2col(img.data(), C, H, W, kH, kW, a, cols.data());
  return cols;
}
}  // namespace

float hla_im2col_absmax(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                        int64_t kW, const Conv2dArgs& a, const HadamardKeep& keep) {
  const auto cols = dequantized_cols(q, s, C, H, W, kH, kW, a);
  const int64_t I = C * kH * kW, L = static_cast<int64_t>(cols.size()) / I;
  return ref::fwht16_rows_keep_absmax(cols.data(), I, L, L, keep);
}

void hla_im2col_quantize(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                         int64_t kW, const Conv2dArgs& a, const HadamardKeep& keep, float inv,
                         const QuantParams& p, int8_t* out, int64_t ldq) {
  const auto cols = dequantized_cols(q, s, C, H, W, kH, kW, a);
  const int64_t I = C * kH * kW, L = static_cast<int64_t>(cols.size()) / I;
  ref::fwht16_rows_keep_quantize(cols.data(), I, L, L, keep, inv, p, out, ldq);
}

float hla_im2col_table(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                       const Conv2dArgs& a, const HadamardKeep& keep, float* table) {
  const int64_t WB = conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]) / 16;
  const std::vector<char> read = input_rows_read(H, kH, a);
  float m = 0.f;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < kW; ++j)
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t wb = 0; wb < WB; ++wb) {
          float* e = table + (((c * kW + j) * H + ih) * WB + wb) * keep.r;
          float t[16];
          for (int k = 0; k < 16; ++k) {
            const int64_t iw = wb * 16 + k - a.padding[1] + j * a.dilation[1];
            t[k] = read[static_cast<size_t>(ih)] && iw >= 0 && iw < W ? static_cast<float>(q[(c * H + ih) * W + iw]) * s
                                                                       : 0.f;
          }
          fwht16_scalar(t);
          for (int k = 0; k < keep.r; ++k) {
            e[k] = t[keep.idx[k]];
            m = std::max(m, std::fabs(e[k]));
          }
        }
  return m;
}

void hla_im2col_table_quantize(const float* table, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                               const Conv2dArgs& a, const HadamardKeep& keep, float inv, int qmax, int8_t* out,
                               int64_t ldq) {
  std::vector<int8_t> qt(static_cast<size_t>(hla_im2col_table_size(C, H, W, kW, a, keep)));
  for (size_t e = 0; e < qt.size(); ++e) qt[e] = quant::quantize_rtn(table[e], inv, qmax);
  expand_table_rows(qt.data(), C, H, W, kH, kW, a, keep.r, out, ldq);
}

namespace {
// Calls f(out_row, col, value) for every kept output of the column transform.
template <typename F>
void for_each_col_output(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         const HadamardKeep& keep, F&& f) {
  const int64_t blocks = (rows + 15) / 16;
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t c = 0; c < cols; ++c) {
      float a[16];
      for (int t = 0; t < 16; ++t) a[t] = 16 * b + t < rows ? x[(16 * b + t) * ldx + c] : 0.f;
      fwht16_scalar(a);
      for (int j = 0; j < keep.r; ++j) f(b * keep.r + j, c, a[keep.idx[j]]);
    }
}
}  // namespace

TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  TensorStats s;
  for_each_col_output(x, rows, cols, ldx, keep, [&](int64_t, int64_t, float v) { stats_add(s, v); });
  return s;
}

void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q) {
  for_each_col_output(x, rows, cols, ldx, keep, [&](int64_t R, int64_t c, float v) {
    const int64_t e = R * cols + c;
    q[e] = quant_one(v, inv, p, static_cast<uint64_t>(e));
  });
}

void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                 float* y) {
  for_each_col_output(x, rows, cols, ldx, keep,
                      [&](int64_t R, int64_t c, float v) { y[R * cols + c] = v; });
}

TensorStats tensor_stats(const float* x, int64_t n) {
  TensorStats s;
  for (int64_t i = 0; i < n; ++i) stats_add(s, x[i]);
  return s;
}

void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = quant_one(x[i], inv, p, static_cast<uint64_t>(i));
}

DualScales fwht16_dual_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                const QuantParams& prow, bool per_row, int8_t* q_rows,
                                float* row_scale, const HadamardKeep& keep,
                                const QuantParams& pcol, int8_t* q_cols) {
  DualScales s;
  if (per_row) {
    ref::fwht16_rows_quantize_per_row(x, rows, cols, ldx, prow, q_rows, row_scale);
  } else {
    const float m = ref::fwht16_rows_absmax(x, rows, cols, ldx, nullptr);
    s.rows = quant::scale_from_absmax(m, prow.qmax);
    ref::fwht16_rows_quantize(x, rows, cols, ldx, nullptr, quant::inv_scale_from_absmax(m, prow.qmax), prow, q_rows);
  }
  const TensorStats st = ref::fwht16_cols_stats(x, rows, cols, ldx, keep);
  s.cols = quant::scale_from_absmax(st.absmax, pcol.qmax);
  ref::fwht16_cols_quantize(x, rows, cols, ldx, keep, quant::inv_scale_from_absmax(st.absmax, pcol.qmax), pcol, q_cols);
  return s;
}

}  // namespace ref

const QuantizeImpl kQuantizeReference{
    ref::philox_fill,
    ref::fwht16_rows_absmax,
    ref::fwht16_rows_quantize,
    ref::fwht16_rows_quantize_per_row,
    ref::fwht16_rows,
    ref::fwht16_rows_keep_absmax,
    ref::fwht16_rows_keep_quantize,
    ref::hla_im2col_absmax,
    ref::hla_im2col_quantize,
    ref::hla_im2col_table,
    ref::hla_im2col_table_quantize,
    ref::fwht16_cols_stats,
    ref::fwht16_cols_quantize,
    ref::fwht16_cols,
    ref::fwht16_dual_quantize,
    ref::tensor_stats,
    ref::quantize};

}  // namespace lb::cpu
