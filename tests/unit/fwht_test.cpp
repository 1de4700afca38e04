// fwht: against explicit Sylvester Hadamard matrices (built here by the recursion
// H_2n = [[H, H], [H, -H]], independent of the butterfly), H·H = B·I, blocks, zero padding,
// any axis, the threaded paths, f64 gradchecks, backward = truncated transform of the
// gradient, nothing saved, and errors.
#include <gtest/gtest.h>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

// H_{2^k} as a row-major B x B matrix of ±1.
std::vector<double> sylvester(int k) {
  std::vector<double> h = {1.0};
  int64_t n = 1;
  for (int s = 0; s < k; ++s) {
    std::vector<double> g(4 * n * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double v = h[i * n + j];
        g[i * 2 * n + j] = v;
        g[i * 2 * n + j + n] = v;
        g[(i + n) * 2 * n + j] = v;
        g[(i + n) * 2 * n + j + n] = -v;
      }
    h.swap(g);
    n *= 2;
  }
  return h;
}

// Reference: along `dim` of contiguous x (f64 values), zero-pad to a multiple of B and
// multiply each block by H explicitly.
Tensor fwht_reference(const Tensor& x, int64_t dim, int k) {
  const int64_t B = int64_t{1} << k;
  const auto h = sylvester(k);
  const Shape s = x.shape();
  const int64_t L = s[dim], Lp = (L + B - 1) / B * B;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(s.size()); ++d) inner *= s[d];
  const auto xv = x.to_double_vector();
  Shape os = s;
  os[dim] = Lp;
  std::vector<double> y(outer * Lp * inner, 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c)
      for (int64_t b0 = 0; b0 < Lp; b0 += B)
        for (int64_t i = 0; i < B; ++i) {
          double acc = 0;
          for (int64_t j = 0; j < B; ++j) {
            const int64_t l = b0 + j;
            if (l < L) acc += h[i * B + j] * xv[(o * L + l) * inner + c];
          }
          y[(o * Lp + b0 + i) * inner + c] = acc;
        }
  return Tensor::from_vector<double>(y, os);
}

TEST(Fwht, SylvesterReferenceIsOrthogonalUpToB) {
  // The reference itself: H_16 H_16 = 16 I, ±1 entries, symmetric, first row all ones.
  const auto h = sylvester(4);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(h[i], 1.0);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(std::abs(h[i * 16 + j]), 1.0);
      EXPECT_EQ(h[i * 16 + j], h[j * 16 + i]);
      double dot = 0;
      for (int m = 0; m < 16; ++m) dot += h[i * 16 + m] * h[m * 16 + j];
      EXPECT_EQ(dot, i == j ? 16.0 : 0.0);
    }
  }
}

TEST(Fwht, TransformOfIdentityIsH16AndTwiceIs16I) {
  std::vector<double> eye(256, 0.0);
  for (int i = 0; i < 16; ++i) eye[i * 17] = 1;
  const Tensor I = Tensor::from_vector<double>(eye, {16, 16});
  const Tensor H = fwht(I, 1, 4);  // row i = H e_i = column i of H = row i (symmetric)
  EXPECT_EQ(H.to_double_vector(), sylvester(4));
  const Tensor HH = fwht(H, 1, 4);
  std::vector<double> sixteen(256, 0.0);
  for (int i = 0; i < 16; ++i) sixteen[i * 17] = 16;
  EXPECT_EQ(HH.to_double_vector(), sixteen);
  // Along dim 0 as well (H applied to columns).
  EXPECT_EQ(fwht(I, 0, 4).to_double_vector(), sylvester(4));
  // Random data: applying twice multiplies by B.
  const Tensor x = testing::randn({5, 32}, 1);
  EXPECT_TRUE(testing::all_close(fwht(fwht(x, 1, 4), 1, 4), mul_scalar(x, 16.0), 1e-14, 1e-13));
}

TEST(Fwht, MatchesExplicitMatrixOnBlocksAndPadding) {
  struct Case {
    Shape shape;
    int64_t dim;
    int k;
  };
  const std::vector<Case> cases = {
      {{3, 16}, 1, 4},     // one block
      {{2, 48}, -1, 4},    // three independent blocks
      {{4, 21}, 1, 4},     // padded 21 -> 32
      {{5}, 0, 3},         // block longer than the axis: 5 -> 8
      {{2, 16, 3}, 1, 4},  // middle axis
      {{13, 2, 2}, 0, 2},  // first axis, padded 13 -> 16
      {{3, 7}, 1, 0},      // B = 1: identity
      {{2, 5, 3}, 1, 5},   // 5 -> 32
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + " dim " + std::to_string(c.dim) + " k " + std::to_string(c.k));
    const Tensor x = testing::randn(c.shape, 100 + c.k);
    const int64_t d = c.dim < 0 ? c.dim + static_cast<int64_t>(c.shape.size()) : c.dim;
    const Tensor want = fwht_reference(x, d, c.k);
    const Tensor y = fwht(x, c.dim, c.k);
    EXPECT_TRUE(testing::all_close(y, want, 1e-12, 1e-12));
    const Tensor y32 = fwht(x.to(DType::F32), c.dim, c.k);
    EXPECT_EQ(y32.dtype(), DType::F32);
    EXPECT_TRUE(testing::all_close(y32, want, 1e-5, 1e-5));
    // Non-contiguous input gives the same result.
    const Tensor xt = x.transpose(0, -1).contiguous().transpose(0, -1);
    ASSERT_FALSE(c.shape.size() > 1 && xt.is_contiguous());
    EXPECT_TRUE(testing::all_close(fwht(xt, c.dim, c.k), want, 1e-12, 1e-12));
  }
  // Padding: the first L outputs of a padded block equal those of an explicitly zero-padded
  // input, and the padded length is reported in the shape.
  const Tensor x = testing::randn({2, 10}, 7);
  const Tensor xp = concat({x, Tensor::zeros({2, 6}, DType::F64)}, 1);
  EXPECT_EQ(fwht(x, 1, 4).shape(), (Shape{2, 16}));
  EXPECT_EQ(fwht(x, 1, 4).to_double_vector(), fwht(xp, 1, 4).to_double_vector());
  EXPECT_EQ(fwht(Tensor::zeros({3, 0}), 1, 4).shape(), (Shape{3, 0}));
}

TEST(Fwht, ThreadedPathsMatchReference) {
  // Last axis, many rows (the HOT shape: k = 4); and a non-last axis with > 512 columns
  // (several column chunks per block).
  const Tensor a = testing::randn({256, 200}, 11, DType::F32);
  EXPECT_TRUE(testing::all_close(fwht(a, 1, 4), fwht_reference(a, 1, 4), 1e-5, 1e-5));
  const Tensor b = testing::randn({3, 8, 1100}, 12, DType::F64);
  EXPECT_TRUE(testing::all_close(fwht(b, 1, 3), fwht_reference(b, 1, 3), 1e-12, 1e-12));
  const Tensor c = testing::randn({40, 700}, 13, DType::F64);
  EXPECT_TRUE(testing::all_close(fwht(c, 0, 4), fwht_reference(c, 0, 4), 1e-12, 1e-12));
}

TEST(Fwht, Gradcheck) {
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return fwht(v[0], 1, 2); },
                                 {testing::randn({3, 6}, 21)}));  // padded 6 -> 8
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return fwht(v[0], 1, 2); },
                                 {testing::randn({3, 5, 2}, 22)}));  // middle axis, padded
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return fwht(v[0], 0, 3); },
                                 {testing::randn({8, 3}, 23)}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return fwht(v[0].transpose(0, 1), -1, 4); },
                                 {testing::randn({20, 2}, 24)}));
}

TEST(Fwht, BackwardIsTruncatedTransformAndSavesNothing) {
  Tensor x = testing::randn({4, 11}, 31);
  x.set_requires_grad();
  const int64_t before = autograd::saved_bytes();
  Tensor y = fwht(x, 1, 4);
  EXPECT_EQ(autograd::saved_bytes(), before);
  const Tensor g = testing::randn({4, 16}, 32);
  y.backward(g);
  // dx = (H g)[:, :11], with H from the explicit matrix.
  EXPECT_TRUE(testing::all_close(x.grad(), fwht_reference(g, 1, 4).slice(1, 0, 11), 1e-12, 1e-12));
}

TEST(Fwht, Errors) {
  EXPECT_THROW(fwht(Tensor::zeros({4}, DType::I32), 0, 2), Error);
  EXPECT_THROW(fwht(Tensor::zeros({4}), 0, -1), Error);
  EXPECT_THROW(fwht(Tensor::zeros({4}), 0, 31), Error);
  EXPECT_THROW(fwht(Tensor::scalar(1.0), 0, 2), Error);
  EXPECT_THROW(fwht(Tensor::zeros({4, 4}), 2, 2), Error);
  EXPECT_THROW(fwht(Tensor(), 0, 2), Error);
}

}  // namespace
}  // namespace lb
