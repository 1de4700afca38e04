// The per-thread work of the CUDA quantisation kernels (src/backend/quantize_blocks.h), run
// here for every thread of a launch in a loop, against the CPU kernels (src/cpu/quantize.h):
// the same int8 levels bit for bit (RTN and stochastic rounding, 4 and 8 bits), maxima, scales,
// transforms, and statistics to the CPU vector kernels' f32 partial sums — so the index arithmetic, padding and kept-row selection the GPU
// runs are checked on every machine. (cuda_hot_test checks the kernels themselves on a GPU.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lb/core/quantize_formulas.h"
#include "src/backend/quantize.h"
#include "src/backend/quantize_blocks.h"
#include "testing/testing.h"

namespace lb {
namespace {

namespace qb = backend::quant_blocks;

backend::QuantParams params(int bits, bool stochastic) {
  backend::QuantParams p;
  p.qmax = quant::qmax_for_bits(bits);
  p.stochastic = stochastic;
  p.key = quant::philox_key(77, 5, 9, 1, 3);
  return p;
}

std::vector<double> values(const Tensor& t) { return t.to_double_vector(); }

TEST(QuantizeBlocks, RowThreadsGiveTheCpuKernelsResults) {
  const backend::QuantizeKernels& k = backend::kCpuQuantize;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 50}, {16, 48}, {1, 3}}) {
    const Tensor x = testing::randn({rows, cols}, 3).to(DType::F32);
    const float* px = x.data<float>();
    const int64_t c16 = backend::round_up16(cols), n = qb::row_threads(rows, cols);
    std::vector<float> row_max(static_cast<size_t>(rows), 0.f);
    Tensor y = Tensor::zeros({rows, c16});
    for (int64_t t = 0; t < n; ++t) {
      int64_t r = 0, c0 = 0;
      float a[16];
      qb::row_block(px, cols, t, &r, &c0, a);
      row_max[static_cast<size_t>(r)] = std::max(row_max[static_cast<size_t>(r)], qb::block_absmax(a));
      for (int j = 0; j < 16; ++j) y.data<float>()[qb::row_output(r, c0, j, cols)] = a[j];
    }
    Tensor yc = Tensor::empty({rows, c16});
    k.rows(x, yc);
    EXPECT_EQ(values(y), values(yc)) << rows << "x" << cols << " transform";
    EXPECT_EQ(*std::max_element(row_max.begin(), row_max.end()), k.rows_absmax(x));
    for (int bits : {4, 8})
      for (bool sr : {false, true}) {
        const backend::QuantParams p = params(bits, sr);
        const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " " + std::to_string(bits) +
                                 (sr ? "-bit SR" : "-bit RTN");
        // per-tensor inverse, then per-row scales (the per-token path's two launches)
        Tensor q = Tensor::zeros({rows, c16}, DType::I8), qc = Tensor::empty({rows, c16}, DType::I8);
        for (int64_t t = 0; t < n; ++t) {
          int64_t r = 0, c0 = 0;
          float a[16];
          qb::row_block(px, cols, t, &r, &c0, a);
          qb::quantize_row_block(a, r, c0, cols, 0.41f, p, q.data<int8_t>());
        }
        k.rows_quantize(x, 0.41f, p, qc);
        EXPECT_EQ(values(q), values(qc)) << what;
        Tensor scale = Tensor::empty({rows}), scale_c = Tensor::empty({rows});
        for (int64_t r = 0; r < rows; ++r)
          scale.data<float>()[r] = quant::scale_from_absmax(row_max[static_cast<size_t>(r)], p.qmax);
        for (int64_t t = 0; t < n; ++t) {
          int64_t r = 0, c0 = 0;
          float a[16];
          qb::row_block(px, cols, t, &r, &c0, a);
          qb::quantize_row_block(a, r, c0, cols, quant::inv_scale_from_absmax(row_max[static_cast<size_t>(r)], p.qmax),
                                 p, q.data<int8_t>());
        }
        k.rows_quantize_per_row(x, p, qc, scale_c);
        EXPECT_EQ(values(q), values(qc)) << what << " per row";
        EXPECT_EQ(values(scale), values(scale_c)) << what << " row scales";
      }
  }
}

TEST(QuantizeBlocks, ColumnThreadsGiveTheCpuKernelsResults) {
  const backend::QuantizeKernels& k = backend::kCpuQuantize;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 50}, {64, 48}, {3, 1}})
    for (int r : {16, 8, 3}) {
      backend::HadamardKeep keep;
      keep.r = r;
      for (int j = 0; j < r; ++j) keep.idx[j] = (j * 7 + 2) % 16;
      const Tensor x = testing::randn({rows, cols}, 4).to(DType::F32);
      const float* px = x.data<float>();
      const int64_t out_rows = backend::cols_out_rows(rows, keep), n = qb::col_threads(rows, cols);
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " keep " + std::to_string(r);
      float m = 0.f;
      double sq = 0.0, ab = 0.0;
      Tensor y = Tensor::zeros({out_rows, cols});
      const backend::QuantParams p = params(8, true);
      Tensor q = Tensor::zeros({out_rows, cols}, DType::I8);
      for (int64_t t = 0; t < n; ++t) {
        int64_t b = 0, c = 0;
        float a[16];
        qb::col_block(px, rows, cols, t, &b, &c, a);
        for (int j = 0; j < keep.r; ++j) {
          const float v = a[keep.idx[j]];
          const int64_t e = qb::col_output(b, j, keep.r, cols, c);
          m = std::max(m, std::fabs(v));
          sq += static_cast<double>(v) * v;
          ab += std::fabs(v);
          y.data<float>()[e] = v;
          q.data<int8_t>()[e] = qb::quantize_one(v, 0.77f, p, static_cast<uint64_t>(e));
        }
      }
      const backend::TensorStats st = k.cols_stats(x, keep);
      EXPECT_EQ(m, st.absmax) << what;
      EXPECT_NEAR(sq, st.sum_sq, 1e-6 * st.sum_sq) << what;
      EXPECT_NEAR(ab, st.sum_abs, 1e-6 * st.sum_abs) << what;
      EXPECT_EQ((rows + 15) / 16 * keep.r * cols, st.count) << what;  // cuda/quantize.cu's count
      Tensor yc = Tensor::empty({out_rows, cols});
      k.cols(x, keep, yc);
      EXPECT_EQ(values(y), values(yc)) << what << " transform";
      Tensor qc = Tensor::empty({out_rows, cols}, DType::I8);
      k.cols_quantize(x, keep, 0.77f, p, qc);
      EXPECT_EQ(values(q), values(qc)) << what << " levels";
    }
}

}  // namespace
}  // namespace lb
