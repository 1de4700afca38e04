// matmul, linear and eigh against PyTorch (fixtures from tools/golden/gen_linalg.py): outputs
// and gradients of sum(y * r), in f32 (rtol 1e-4, atol 1e-5) and f64 (1e-10).
#include <gtest/gtest.h>

#include <cmath>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

struct Tol {
  DType dtype;
  double rtol, atol;
};
const Tol kTols[] = {{DType::F32, 1e-4, 1e-5}, {DType::F64, 1e-10, 1e-10}};

Tensor leaf(const io::SafetensorsFile& f, const char* name, DType dt) {
  Tensor t = f.at(name).to(dt).detach();
  t.set_requires_grad(true);
  return t;
}

// Σ y ⊙ r, backpropagated.
void backprop(const Tensor& y, const Tensor& r) { sum(mul(y, r.to(y.dtype()))).backward(); }

class GoldenMatmul : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenMatmul, ForwardAndGradients) {
  const auto f = testing::load_fixture(std::string("linalg_matmul_") + GetParam());
  const bool ta = f.metadata.at("trans_a") == "1", tb = f.metadata.at("trans_b") == "1";
  for (const Tol& t : kTols) {
    Tensor a = leaf(f, "a", t.dtype), b = leaf(f, "b", t.dtype);
    const Tensor y = matmul(a, b, ta, tb);
    EXPECT_TRUE(testing::all_close(y, f.at("y"), t.rtol, t.atol)) << dtype_name(t.dtype);
    backprop(y, f.at("r"));
    EXPECT_TRUE(testing::all_close(a.grad(), f.at("ga"), t.rtol, t.atol)) << dtype_name(t.dtype);
    EXPECT_TRUE(testing::all_close(b.grad(), f.at("gb"), t.rtol, t.atol)) << dtype_name(t.dtype);
  }
}
INSTANTIATE_TEST_SUITE_P(Linalg, GoldenMatmul,
                         ::testing::Values("nn", "nt", "tn", "tt", "batched", "broadcast",
                                           "shared_b"));

class GoldenLinear : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenLinear, ForwardAndGradients) {
  const auto f = testing::load_fixture(std::string("linalg_linear_") + GetParam());
  const bool has_bias = f.find("b") != nullptr;
  for (const Tol& t : kTols) {
    Tensor x = leaf(f, "x", t.dtype), w = leaf(f, "w", t.dtype);
    Tensor b = has_bias ? leaf(f, "b", t.dtype) : Tensor();
    const Tensor y = linear(x, w, b);
    EXPECT_TRUE(testing::all_close(y, f.at("y"), t.rtol, t.atol)) << dtype_name(t.dtype);
    backprop(y, f.at("r"));
    EXPECT_TRUE(testing::all_close(x.grad(), f.at("gx"), t.rtol, t.atol)) << dtype_name(t.dtype);
    EXPECT_TRUE(testing::all_close(w.grad(), f.at("gw"), t.rtol, t.atol)) << dtype_name(t.dtype);
    if (has_bias)
      EXPECT_TRUE(testing::all_close(b.grad(), f.at("gb"), t.rtol, t.atol)) << dtype_name(t.dtype);
  }
}
INSTANTIATE_TEST_SUITE_P(Linalg, GoldenLinear,
                         ::testing::Values("bias_2d", "bias_3d", "nobias_3d", "bias_1d"));

TEST(GoldenEigh, EigenvaluesAndVectorsUpToSign) {
  const auto f = testing::load_fixture("linalg_eigh");
  for (const Tol& t : kTols) {
    const EighResult r = eigh(f.at("a").to(t.dtype));
    EXPECT_TRUE(testing::all_close(r.eigenvalues, f.at("w"), t.rtol, t.atol)) << dtype_name(t.dtype);
    // Each eigenvector is defined up to sign: align ours to PyTorch's by the sign of the dot.
    const auto v = r.eigenvectors.to_double_vector(), e = f.at("v").to_double_vector();
    const int64_t n = r.eigenvalues.numel();
    std::vector<double> aligned(v.size());
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += v[i * n + j] * e[i * n + j];
      for (int64_t i = 0; i < n; ++i) aligned[i * n + j] = dot < 0 ? -v[i * n + j] : v[i * n + j];
    }
    // Eigenvectors are less well conditioned than eigenvalues (gap-dependent): f32 to 1e-4.
    const double tol = t.dtype == DType::F32 ? 1e-4 : 1e-9;
    EXPECT_TRUE(testing::all_close(Tensor::from_vector<double>(aligned, {n, n}), f.at("v"), tol, tol))
        << dtype_name(t.dtype);
  }
}

}  // namespace
}  // namespace lb
