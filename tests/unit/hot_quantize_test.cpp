// HOT quantisation kernels (src/cpu/quantize.h): the dispatched vector kernels (AVX-512, or
// AVX2 on a CPU without it or under LEANBACK_ISA=avx2) equal their scalar references bit for
// bit, the transforms equal an explicit Hadamard matrix product, the Philox draws equal the
// cuRAND-layout stream, stochastic rounding is unbiased and in range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "lb/core/philox.h"
#include "lb/core/quantize_formulas.h"
#include "lb/ops/conv.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/quantize.h"

namespace lb::cpu {
namespace {

std::vector<float> random_f32(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

int hadamard(int i, int t) { return __builtin_popcount(static_cast<unsigned>(i & t)) % 2 ? -1 : 1; }

HadamardKeep keep_of(std::vector<int> idx) {
  HadamardKeep k;
  k.r = static_cast<int>(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) k.idx[j] = idx[j];
  return k;
}

// The table quantize.cpp dispatches to: what the comparisons with ref:: test.
const char* dispatched_kernels() { return quantize_kernel(); }

TEST(HotQuantize, PhiloxFillMatchesStream) {
  std::printf("[ kernels  ] HOT quantisation: %s\n", dispatched_kernels());
  RecordProperty("kernels", dispatched_kernels());
  const auto key = quant::philox_key(0x1234567890abcdefULL, 77, 5, 1);
  // The stream of curand_init(seed, subsequence, 0): PhiloxStream is tested against cuRAND.
  const uint64_t sub = (uint64_t{key.sub1} << 32) | key.sub0;
  PhiloxStream s(0x1234567890abcdefULL, sub, 0);
  std::vector<uint32_t> expect(1500);
  for (auto& w : expect) w = s.next_u32();
  for (uint64_t e0 : {0ull, 1ull, 3ull, 5ull, 64ull, 130ull})
    for (int64_t n : {1, 3, 16, 63, 64, 65, 150, 256, 300, 1000}) {
      std::vector<uint32_t> got(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
      philox_fill(key, e0, n, got.data());
      ref::philox_fill(key, e0, n, ref.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], expect[e0 + i]) << "e0 " << e0 << " i " << i;
        ASSERT_EQ(ref[i], expect[e0 + i]);
      }
    }
  // Counters whose low word wraps inside a vector group.
  for (uint64_t back : {5ull, 40ull}) {
    const uint64_t e0 = (uint64_t{0xFFFFFFFFu} - back) * 4;
    std::vector<uint32_t> got(600), ref(600);
    philox_fill(key, e0, 600, got.data());
    ref::philox_fill(key, e0, 600, ref.data());
    EXPECT_EQ(got, ref) << back;
  }
}

TEST(HotQuantize, TransformsMatchExplicitHadamard) {
  const int64_t rows = 37, cols = 29, ldx = 31;
  const auto x = random_f32(static_cast<size_t>(rows * ldx), 1);
  const int64_t c16 = round_up16(cols);
  std::vector<float> y(static_cast<size_t>(rows * c16)), yr(y.size());
  fwht16_rows(x.data(), rows, cols, ldx, y.data());
  ref::fwht16_rows(x.data(), rows, cols, ldx, yr.data());
  EXPECT_EQ(y, yr);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < c16; ++c) {
      double s = 0;
      const int64_t b = c / 16 * 16;
      for (int t = 0; t < 16; ++t)
        if (b + t < cols) s += hadamard(static_cast<int>(c - b), t) * double{x[r * ldx + b + t]};
      ASSERT_NEAR(y[r * c16 + c], s, 1e-5) << r << "," << c;
    }
  // Columns, keeping a subset in a chosen order.
  const HadamardKeep keep = keep_of({0, 8, 4, 15, 2});
  const int64_t orows = cols_out_rows(rows, keep);
  std::vector<float> z(static_cast<size_t>(orows * cols)), zr(z.size());
  fwht16_cols(x.data(), rows, cols, ldx, keep, z.data());
  ref::fwht16_cols(x.data(), rows, cols, ldx, keep, zr.data());
  EXPECT_EQ(z, zr);
  for (int64_t R = 0; R < orows; ++R)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t b = R / keep.r;
      double s = 0;
      for (int t = 0; t < 16; ++t)
        if (16 * b + t < rows) s += hadamard(keep.idx[R % keep.r], t) * double{x[(16 * b + t) * ldx + c]};
      ASSERT_NEAR(z[R * cols + c], s, 1e-5);
    }
}

TEST(HotQuantize, KernelsEqualReferenceBitForBit) {
  for (int bits : {4, 8})
    for (bool sr : {false, true})
      for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 16}, {33, 50}, {130, 200}, {300, 900}}) {  // the last: parallel
        const int64_t ldx = cols + 1;
        const auto x = random_f32(static_cast<size_t>(rows * ldx), static_cast<uint32_t>(rows + cols), 2.f);
        QuantParams p;
        p.qmax = quant::qmax_for_bits(bits);
        p.stochastic = sr;
        p.key = quant::philox_key(9, 3, 2, 0);
        const std::string what = "bits " + std::to_string(bits) + " sr " + std::to_string(sr) + " " +
                                 std::to_string(rows) + "x" + std::to_string(cols);
        // rows: absmax, per-tensor and per-row quantisation
        std::vector<float> ra(static_cast<size_t>(rows)), rr(ra.size());
        const float m = fwht16_rows_absmax(x.data(), rows, cols, ldx, ra.data());
        EXPECT_EQ(m, ref::fwht16_rows_absmax(x.data(), rows, cols, ldx, rr.data())) << what;
        EXPECT_EQ(ra, rr) << what;
        const int64_t c16 = round_up16(cols);
        std::vector<int8_t> q(static_cast<size_t>(rows * c16)), qr(q.size());
        const float inv = quant::inv_scale_from_absmax(m, p.qmax);
        fwht16_rows_quantize(x.data(), rows, cols, ldx, nullptr, inv, p, q.data());
        ref::fwht16_rows_quantize(x.data(), rows, cols, ldx, nullptr, inv, p, qr.data());
        EXPECT_EQ(q, qr) << what;
        int64_t nonzero = 0;
        for (int8_t v : q) nonzero += v != 0;
        EXPECT_GT(nonzero, static_cast<int64_t>(q.size()) / 4) << what;  // not trivially all zero
        std::vector<float> s(static_cast<size_t>(rows)), sr_(s.size());
        fwht16_rows_quantize_per_row(x.data(), rows, cols, ldx, p, q.data(), s.data());
        ref::fwht16_rows_quantize_per_row(x.data(), rows, cols, ldx, p, qr.data(), sr_.data());
        EXPECT_EQ(q, qr) << what;
        EXPECT_EQ(s, sr_) << what;
        // columns (HLA-like subset): stats and quantisation
        const HadamardKeep keep = keep_of({0, 2, 4, 6, 8, 10, 12, 14});
        const TensorStats st = fwht16_cols_stats(x.data(), rows, cols, ldx, keep);
        const TensorStats str = ref::fwht16_cols_stats(x.data(), rows, cols, ldx, keep);
        EXPECT_EQ(st.absmax, str.absmax) << what;
        EXPECT_NEAR(st.sum_sq, str.sum_sq, 1e-5 * str.sum_sq) << what;
        EXPECT_NEAR(st.sum_abs, str.sum_abs, 1e-5 * str.sum_abs) << what;
        EXPECT_EQ(st.count, str.count);
        std::vector<int8_t> qc(static_cast<size_t>(cols_out_rows(rows, keep) * cols)), qcr(qc.size());
        const float ic = quant::inv_scale_from_absmax(st.absmax, p.qmax);
        fwht16_cols_quantize(x.data(), rows, cols, ldx, keep, ic, p, qc.data());
        ref::fwht16_cols_quantize(x.data(), rows, cols, ldx, keep, ic, p, qcr.data());
        EXPECT_EQ(qc, qcr) << what;
        // both transforms fused (two passes over x), per-row and per-tensor row scales
        for (bool per_row : {false, true}) {
          QuantParams pc = p;
          pc.qmax = 127;
          pc.key = quant::philox_key(9, 3, 2, 1);
          std::vector<int8_t> a(q.size()), ar(q.size()), b(qc.size()), br(qc.size());
          std::vector<float> rs(static_cast<size_t>(rows)), rsr(rs.size());
          const DualScales d = fwht16_dual_quantize(x.data(), rows, cols, ldx, p, per_row, a.data(), rs.data(), keep, pc, b.data());
          const DualScales dr = ref::fwht16_dual_quantize(x.data(), rows, cols, ldx, p, per_row, ar.data(), rsr.data(), keep, pc, br.data());
          EXPECT_EQ(a, ar) << what << " per_row " << per_row;
          EXPECT_EQ(b, br) << what << " per_row " << per_row;
          EXPECT_EQ(d.rows, dr.rows);
          EXPECT_EQ(d.cols, dr.cols);
          if (per_row) EXPECT_EQ(rs, rsr);
        }
        // flat
        std::vector<int8_t> qf(static_cast<size_t>(rows * ldx)), qfr(qf.size());
        const TensorStats fs = tensor_stats(x.data(), rows * ldx);
        EXPECT_EQ(fs.absmax, ref::tensor_stats(x.data(), rows * ldx).absmax);
        quantize(x.data(), rows * ldx, quant::inv_scale_from_absmax(fs.absmax, p.qmax), p, qf.data());
        ref::quantize(x.data(), rows * ldx, quant::inv_scale_from_absmax(fs.absmax, p.qmax), p, qfr.data());
        EXPECT_EQ(qf, qfr) << what;
        for (int8_t v : qf) ASSERT_LE(std::abs(int{v}), p.qmax);
      }
}

TEST(HotQuantize, KeptSubsetsOfAnySizeEqualReferenceBitForBit) {
  // HLA keeps 8 outputs per block; the kernels take any keep.r <= 16 in any order (the vector
  // kernels pick the kept lanes by permutation and write r of 16 results).
  const std::vector<HadamardKeep> keeps{keep_of({5}), keep_of({3, 0, 9}),
                                        keep_of({15, 1, 14, 2, 13, 3, 12, 4, 11, 5, 10, 6}),
                                        keep_of({15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0})};
  const int64_t rows = 37, cols = 45, ldx = 47;
  auto x = random_f32(static_cast<size_t>(rows * ldx), 11);
  for (float& v : x) v += 1.f;  // output 0 (the sum) dominates: a kernel must ignore it where it is dropped
  // A 3x3 convolution, stride 1, padding 1 (Wo = 16: the table path applies too).
  const int64_t C = 2, H = 9, W = 16, k = 3, I = C * k * k, L = H * W;
  Conv2dArgs a;
  a.padding = {1, 1};
  std::vector<int8_t> img(static_cast<size_t>(C * H * W));
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> d(-127, 127);
  for (auto& v : img) v = static_cast<int8_t>(d(gen));
  const float s = 0.02f;
  for (const HadamardKeep& keep : keeps)
    for (bool sr : {false, true}) {
      const std::string what = "keep.r " + std::to_string(keep.r) + " sr " + std::to_string(sr);
      QuantParams p;
      p.stochastic = sr;
      p.key = quant::philox_key(3, 1, 4, 1);
      // along rows (contiguous axis), into a wider matrix
      const int64_t width = (cols + 15) / 16 * keep.r, ldq = width + 2;
      const float m = fwht16_rows_keep_absmax(x.data(), rows, cols, ldx, keep);
      EXPECT_EQ(m, ref::fwht16_rows_keep_absmax(x.data(), rows, cols, ldx, keep)) << what;
      std::vector<int8_t> q(static_cast<size_t>(rows * ldq), 9), qr(q.size(), 9);
      fwht16_rows_keep_quantize(x.data(), rows, cols, ldx, keep, quant::inv_scale_from_absmax(m, 127), p, q.data(), ldq);
      ref::fwht16_rows_keep_quantize(x.data(), rows, cols, ldx, keep, quant::inv_scale_from_absmax(m, 127), p, qr.data(), ldq);
      EXPECT_EQ(q, qr) << what;
      // along columns
      const TensorStats st = fwht16_cols_stats(x.data(), rows, cols, ldx, keep);
      EXPECT_EQ(st.absmax, ref::fwht16_cols_stats(x.data(), rows, cols, ldx, keep).absmax) << what;
      std::vector<int8_t> qc(static_cast<size_t>(cols_out_rows(rows, keep) * cols)), qcr(qc.size());
      const float ic = quant::inv_scale_from_absmax(st.absmax, 127);
      fwht16_cols_quantize(x.data(), rows, cols, ldx, keep, ic, p, qc.data());
      ref::fwht16_cols_quantize(x.data(), rows, cols, ldx, keep, ic, p, qcr.data());
      EXPECT_EQ(qc, qcr) << what;
      // HLA of an im2col view, direct and by table
      const int64_t iw = (L + 15) / 16 * keep.r;
      const float mi = hla_im2col_absmax(img.data(), s, C, H, W, k, k, a, keep);
      EXPECT_EQ(mi, ref::hla_im2col_absmax(img.data(), s, C, H, W, k, k, a, keep)) << what;
      const float ii = quant::inv_scale_from_absmax(mi, 127);
      std::vector<int8_t> o(static_cast<size_t>(I * iw), 7), orf(o.size(), 7);
      hla_im2col_quantize(img.data(), s, C, H, W, k, k, a, keep, ii, p, o.data(), iw);
      ref::hla_im2col_quantize(img.data(), s, C, H, W, k, k, a, keep, ii, p, orf.data(), iw);
      EXPECT_EQ(o, orf) << what;
      if (sr) continue;  // the table path rounds to nearest only
      ASSERT_TRUE(hla_im2col_table_fits(W, k, a));
      const size_t tn = static_cast<size_t>(hla_im2col_table_size(C, H, W, k, a, keep));
      std::vector<float> t(tn + 16, -1.f), tr(tn + 16, -1.f);  // + 16: nothing written past the end
      EXPECT_EQ(hla_im2col_table(img.data(), s, C, H, W, k, k, a, keep, t.data()), mi) << what;
      ref::hla_im2col_table(img.data(), s, C, H, W, k, k, a, keep, tr.data());
      EXPECT_EQ(t, tr) << what;
      std::vector<int8_t> ot(o.size(), 5);
      hla_im2col_table_quantize(t.data(), C, H, W, k, k, a, keep, ii, 127, ot.data(), iw);
      EXPECT_EQ(ot, orf) << what;
    }
}

TEST(HotQuantize, RowsKeepEqualsColumnsKernelOnTheTranspose) {
  // HLA along the contiguous axis of xᵀ gives the transpose of HLA along the rows of x, bit
  // for bit (the conv fast path relies on it), for RTN and SR (same element indices per
  // layout are not required: only RTN is compared across layouts).
  const HadamardKeep keep = keep_of({0, 2, 4, 6, 8, 10, 12, 14});
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{32, 5}, {48, 33}, {21, 16}}) {
    const auto x = random_f32(static_cast<size_t>(rows * cols), static_cast<uint32_t>(rows * cols));
    std::vector<float> xt(x.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
    const int64_t orows = cols_out_rows(rows, keep);
    const float m = fwht16_rows_keep_absmax(xt.data(), cols, rows, rows, keep);
    EXPECT_EQ(m, ref::fwht16_rows_keep_absmax(xt.data(), cols, rows, rows, keep));
    EXPECT_EQ(m, fwht16_cols_stats(x.data(), rows, cols, cols, keep).absmax);
    for (bool sr : {false, true}) {
      QuantParams p;
      p.qmax = 127;
      p.stochastic = sr;
      p.key = quant::philox_key(1, 2, 3, 4);
      const float inv = quant::inv_scale_from_absmax(m, 127);
      const int64_t ldq = orows + 3;  // written into a wider matrix
      std::vector<int8_t> qt(static_cast<size_t>(cols * ldq), 9), qtr(qt.size(), 9);
      fwht16_rows_keep_quantize(xt.data(), cols, rows, rows, keep, inv, p, qt.data(), ldq);
      ref::fwht16_rows_keep_quantize(xt.data(), cols, rows, rows, keep, inv, p, qtr.data(), ldq);
      EXPECT_EQ(qt, qtr) << rows << "x" << cols << " sr " << sr;
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t j = orows; j < ldq; ++j) EXPECT_EQ(qt[c * ldq + j], 9);  // untouched
      if (sr) continue;
      std::vector<int8_t> q(static_cast<size_t>(orows * cols));
      fwht16_cols_quantize(x.data(), rows, cols, cols, keep, inv, p, q.data());
      for (int64_t R = 0; R < orows; ++R)
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(q[R * cols + c], qt[c * ldq + R]) << R << "," << c;
    }
  }
}

TEST(HotQuantize, HlaOfIm2colFromInt8EqualsTheColumnsPath) {
  // The fused kernel (no column matrix) against im2col of the dequantised image followed by
  // the rows-keep kernels: fast row segments, edges, strides, dilation, L not a multiple of 16.
  struct G {
    int64_t C, H, W, k, stride, pad, dil;
  };
  const HadamardKeep keep = keep_of({0, 2, 4, 6, 8, 10, 12, 14});
  for (const G& g : std::vector<G>{{3, 16, 16, 3, 1, 1, 1}, {2, 17, 20, 3, 1, 1, 1}, {2, 32, 33, 3, 2, 1, 1},
                                   {3, 18, 40, 3, 1, 2, 2}, {4, 9, 9, 1, 1, 0, 1}, {2, 16, 48, 5, 1, 2, 1}, {2, 5, 150, 3, 2, 1, 1}}) {
    std::mt19937 gen(static_cast<uint32_t>(g.H * 100 + g.W));
    std::uniform_int_distribution<int> d(-127, 127);
    std::vector<int8_t> q(static_cast<size_t>(g.C * g.H * g.W));
    for (auto& v : q) v = static_cast<int8_t>(d(gen));
    Conv2dArgs a;
    a.stride = {g.stride, g.stride};
    a.padding = {g.pad, g.pad};
    a.dilation = {g.dil, g.dil};
    const float s = 0.037f;
    const int64_t Ho = (g.H + 2 * g.pad - g.dil * (g.k - 1) - 1) / g.stride + 1;
    const int64_t Wo = (g.W + 2 * g.pad - g.dil * (g.k - 1) - 1) / g.stride + 1, L = Ho * Wo;
    const int64_t I = g.C * g.k * g.k, width = (L + 15) / 16 * keep.r;
    // Independent reference: explicit im2col of the dequantised image, then the scalar kernel.
    std::vector<float> img(q.size()), cols(static_cast<size_t>(I * L));
    for (size_t i = 0; i < q.size(); ++i) img[i] = static_cast<float>(q[i]) * s;
    im2col(img.data(), g.C, g.H, g.W, g.k, g.k, a, cols.data());
    const float m = hla_im2col_absmax(q.data(), s, g.C, g.H, g.W, g.k, g.k, a, keep);
    EXPECT_EQ(m, ref::fwht16_rows_keep_absmax(cols.data(), I, L, L, keep)) << g.H << "x" << g.W;
    EXPECT_EQ(m, ref::hla_im2col_absmax(q.data(), s, g.C, g.H, g.W, g.k, g.k, a, keep));
    for (bool sr : {false, true}) {
      QuantParams p;
      p.stochastic = sr;
      p.key = quant::philox_key(5, 6, 7, 1);
      const float inv = quant::inv_scale_from_absmax(m, 127);
      std::vector<int8_t> o(static_cast<size_t>(I * width)), r(o.size());
      hla_im2col_quantize(q.data(), s, g.C, g.H, g.W, g.k, g.k, a, keep, inv, p, o.data(), width);
      ref::fwht16_rows_keep_quantize(cols.data(), I, L, L, keep, inv, p, r.data(), width);
      EXPECT_EQ(o, r) << g.H << "x" << g.W << " k" << g.k << " s" << g.stride << " sr " << sr;
    }
  }
}

TEST(HotQuantize, HlaOfIm2colByTableEqualsTheColumnsPath) {
  // The one-transform-per-distinct-block path (stride 1 along W, Wo a multiple of 16) against
  // the same explicit columns: edges, dilation, a stride along H, and a stride that skips
  // input rows (filled with outliers there: the absmax must ignore what no output reads).
  struct G {
    int64_t C, H, W, k, stride_h, pad, dil;
  };
  const HadamardKeep keep = keep_of({0, 2, 4, 6, 8, 10, 12, 14});
  for (const G& g : std::vector<G>{{3, 16, 16, 3, 1, 1, 1}, {2, 16, 48, 5, 1, 2, 1}, {2, 11, 32, 3, 1, 2, 2},
                                   {3, 20, 32, 3, 2, 1, 1}, {2, 9, 16, 1, 2, 0, 1}}) {
    std::mt19937 gen(static_cast<uint32_t>(g.H * 100 + g.W + g.k));
    std::uniform_int_distribution<int> d(-20, 20);
    std::vector<int8_t> q(static_cast<size_t>(g.C * g.H * g.W));
    for (auto& v : q) v = static_cast<int8_t>(d(gen));
    Conv2dArgs a;
    a.stride = {g.stride_h, 1};
    a.padding = {g.pad, g.pad};
    a.dilation = {g.dil, g.dil};
    if (g.k == 1) {  // 1x1 stride 2 reads rows 0, 2, 4, ...: levels in [-3, 3], odd rows hold outliers
      for (auto& v : q) v = static_cast<int8_t>(v % 4);
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t ih = 1; ih < g.H; ih += 2) q[static_cast<size_t>((c * g.H + ih) * g.W + 3)] = 127;
    }
    ASSERT_TRUE(hla_im2col_table_fits(g.W, g.k, a)) << g.H << "x" << g.W;
    const float s = 0.037f;
    const int64_t Ho = (g.H + 2 * g.pad - g.dil * (g.k - 1) - 1) / g.stride_h + 1;
    const int64_t Wo = g.W + 2 * g.pad - g.dil * (g.k - 1), L = Ho * Wo;
    const int64_t I = g.C * g.k * g.k, width = L / 16 * keep.r;
    std::vector<float> img(q.size()), cols(static_cast<size_t>(I * L));
    for (size_t i = 0; i < q.size(); ++i) img[i] = static_cast<float>(q[i]) * s;
    im2col(img.data(), g.C, g.H, g.W, g.k, g.k, a, cols.data());
    const float m_cols = ref::fwht16_rows_keep_absmax(cols.data(), I, L, L, keep);
    std::vector<float> table(static_cast<size_t>(hla_im2col_table_size(g.C, g.H, g.W, g.k, a, keep)), -1.f),
        table_ref(table.size(), -2.f);
    const float m = hla_im2col_table(q.data(), s, g.C, g.H, g.W, g.k, g.k, a, keep, table.data());
    EXPECT_EQ(m, m_cols) << g.H << "x" << g.W;
    EXPECT_EQ(ref::hla_im2col_table(q.data(), s, g.C, g.H, g.W, g.k, g.k, a, keep, table_ref.data()), m_cols);
    EXPECT_EQ(table, table_ref) << g.H << "x" << g.W;  // every entry written, unread rows as zeros
    if (g.k == 1) EXPECT_LE(m, 48 * s) << "the absmax saw a row no output reads";  // 16 levels of |v| <= 3
    QuantParams p;  // round to nearest
    const float inv = quant::inv_scale_from_absmax(m, 127);
    std::vector<int8_t> o(static_cast<size_t>(I * width), 99), r(o.size()), o_ref(o.size(), 98);
    hla_im2col_table_quantize(table.data(), g.C, g.H, g.W, g.k, g.k, a, keep, inv, 127, o.data(), width);
    ref::hla_im2col_table_quantize(table_ref.data(), g.C, g.H, g.W, g.k, g.k, a, keep, inv, 127, o_ref.data(), width);
    ref::fwht16_rows_keep_quantize(cols.data(), I, L, L, keep, inv, p, r.data(), width);
    EXPECT_EQ(o, r) << g.H << "x" << g.W << " k" << g.k << " sh" << g.stride_h;
    EXPECT_EQ(o_ref, r) << g.H << "x" << g.W << " k" << g.k << " sh" << g.stride_h;
  }
  Conv2dArgs strided;
  strided.stride = {1, 2};
  EXPECT_FALSE(hla_im2col_table_fits(32, 3, strided));
  Conv2dArgs narrow;
  narrow.padding = {1, 1};
  EXPECT_FALSE(hla_im2col_table_fits(8, 3, narrow));  // Wo = 8: blocks cross output rows
}

TEST(HotQuantize, RoundToNearestIsNearestAndClamped) {
  const float inv = 2.f;  // scale 0.5
  EXPECT_EQ(quant::quantize_rtn(0.74f, inv, 7), 1);   // 1.48 -> 1
  EXPECT_EQ(quant::quantize_rtn(0.76f, inv, 7), 2);   // 1.52 -> 2
  EXPECT_EQ(quant::quantize_rtn(1.25f, inv, 7), 2);   // 2.5 -> 2 (ties to even)
  EXPECT_EQ(quant::quantize_rtn(-1.75f, inv, 7), -4); // -3.5 -> -4
  EXPECT_EQ(quant::quantize_rtn(100.f, inv, 7), 7);
  EXPECT_EQ(quant::quantize_rtn(-100.f, inv, 127), -127);
  EXPECT_EQ(quant::quantize_rtn(5.f, 0.f, 7), 0);     // zero tensor: scale 0
}

TEST(HotQuantize, StochasticRoundingIsUnbiasedAndInRange) {
  // Many independent draws (distinct element indices) of the same values: the mean of the
  // dequantised levels is within 3σ/√N of the value, σ² = frac(1 - frac)·s² per draw.
  const int64_t N = 200000;
  for (int qmax : {7, 127})
    for (float value : {0.3f, -2.71f, 5.5f, 6.999f, -0.01f}) {
      std::vector<float> x(static_cast<size_t>(N), value);
      std::vector<int8_t> q(x.size());
      QuantParams p;
      p.qmax = qmax;
      p.stochastic = true;
      p.key = quant::philox_key(42, 1, 7, 0);
      const float absmax = 7.f, inv = quant::inv_scale_from_absmax(absmax, qmax), s = absmax / qmax;
      quantize(x.data(), N, inv, p, q.data());
      double mean = 0;
      int lo = 1000, hi = -1000;
      for (int8_t v : q) {
        mean += v;
        lo = std::min(lo, int{v});
        hi = std::max(hi, int{v});
      }
      mean = mean / N * s;
      const double v = value * inv, frac = v - std::floor(v);
      const double sigma = std::sqrt(frac * (1 - frac)) * s;
      EXPECT_NEAR(mean, value, 3 * sigma / std::sqrt(double(N)) + 1e-7) << "qmax " << qmax << " value " << value;
      EXPECT_GE(lo, static_cast<int>(std::floor(v)));  // only the two neighbouring levels
      EXPECT_LE(hi, static_cast<int>(std::floor(v)) + 1);
      EXPECT_LE(hi, qmax);
      EXPECT_GE(lo, -qmax);
    }
}

}  // namespace
}  // namespace lb::cpu
