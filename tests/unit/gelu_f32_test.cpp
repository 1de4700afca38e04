// The vectorizable single-precision formulas behind f32 GELU (src/backend/gelu_f32.h): erf and
// tanh against libm over a dense grid, GELU and its derivative (erf and tanh forms) in f32
// against the f64 op, and the constant-derivative scalar ops saving nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/ops.h"
#include "src/backend/gelu_f32.h"
#include "testing/testing.h"

namespace lb {
namespace {

TEST(GeluF32, NormalCdfMatchesLibm) {
  double worst_rel = 0, worst_rel_5 = 0;
  for (double x = -12; x <= 12; x += 1e-3) {
    const float xf = static_cast<float>(x);
    const double cdf = 0.5 * std::erfc(-static_cast<double>(xf) / std::sqrt(2.0));
    const double rel = std::abs(detail::normal_cdf_f32(xf) - cdf) / cdf;
    worst_rel = std::max(worst_rel, rel);
    if (std::abs(x) <= 5) worst_rel_5 = std::max(worst_rel_5, rel);
  }
  // Relative accuracy in the negative tail too (Φ(-12) ≈ 2e-33); the f32 rounding of z²
  // in the exponent limits it there.
  EXPECT_LT(worst_rel_5, 3e-6);
  EXPECT_LT(worst_rel, 2e-5);
  EXPECT_EQ(detail::normal_cdf_f32(INFINITY), 1.f);
  EXPECT_EQ(detail::normal_cdf_f32(-INFINITY), 0.f);
}

// f32 values and gradients vs the f64 (libm) op on a grid covering the tails.
TEST(GeluF32, ValuesAndGradientsMatchF64) {
  std::vector<double> xs;
  for (double x = -10; x <= 10; x += 0.01) xs.push_back(x);
  const int64_t n = static_cast<int64_t>(xs.size());
  for (GeluApprox approx : {GeluApprox::None, GeluApprox::Tanh}) {
    Tensor x64 = Tensor::from_vector(xs, {n});
    Tensor x32 = x64.to(DType::F32);
    x64.set_requires_grad(true);
    x32.set_requires_grad(true);
    const Tensor y64 = gelu(x64, approx), y32 = gelu(x32, approx);
    // Relative accuracy in the tails as well (absolute 1e-12 only around the zero at x = 0).
    EXPECT_TRUE(testing::all_close(y32.to(DType::F64), y64, 2e-5, 1e-12)) << static_cast<int>(approx);
    sum(y64).backward();
    sum(y32).backward();
    EXPECT_TRUE(testing::all_close(x32.grad().to(DType::F64), x64.grad(), 2e-5, 1e-7))
        << static_cast<int>(approx);
    // No NaN or inf at the extremes.
    Tensor big = Tensor::from_vector<double>({-1e30, -100, 100, 1e30}, {4}).to(DType::F32);
    big.set_requires_grad(true);
    const Tensor yb = gelu(big, approx);
    sum(yb).backward();
    for (double v : yb.to_double_vector()) EXPECT_TRUE(std::isfinite(v));
    for (double v : big.grad().to_double_vector()) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(GeluF32, ConstantDerivativeOpsSaveNothing) {
  Tensor x = testing::randn({64}, 1, DType::F32);
  x.set_requires_grad(true);
  const int64_t before = autograd::saved_bytes();
  Tensor y = neg(add_scalar(mul_scalar(x, 3.0), 1.0));
  EXPECT_EQ(autograd::saved_bytes(), before);
  sum(y).backward();
  for (double g : x.grad().to_double_vector()) EXPECT_EQ(g, -3.0);
}

}  // namespace
}  // namespace lb
