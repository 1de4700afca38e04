// matmul, linear and eigh: values against naive loops written here (independent of BLAS),
// f64 finite-difference gradient checks (all transpose combos, batching, broadcasting, views),
// saved-tensor policy, and error messages that name the shapes and dtypes.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Naive reference: out[batch..., i, j] = Σ_k op(a)[.., i, k] op(b)[.., k, j], with batch
// broadcasting, computed from row-major copies. Shapes given explicitly.
Tensor naive_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const auto av = a.to_double_vector(), bv = b.to_double_vector();
  const int64_t M = a.size(ta ? -1 : -2), K = a.size(ta ? -2 : -1), N = b.size(tb ? -2 : -1);
  const Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ab, bb);
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  std::vector<double> out(nb * M * N);
  auto flat = [&](int64_t i, const Shape& own) {  // batch index i -> own batch index
    int64_t r = i, idx = 0, mul = 1;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      const int64_t v = r % batch[d];
      r /= batch[d];
      const int64_t od = d - static_cast<int64_t>(batch.size() - own.size());
      if (od >= 0) {
        idx += (own[od] == 1 ? 0 : v) * mul;
        mul *= own[od];
      }
    }
    return idx;
  };
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  for (int64_t i = 0; i < nb; ++i) {
    const double* pa = av.data() + flat(i, ab) * ar * ac;
    const double* pb = bv.data() + flat(i, bb) * br * bc;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += (ta ? pa[k * ac + m] : pa[m * ac + k]) * (tb ? pb[n * bc + k] : pb[k * bc + n]);
        out[(i * M + m) * N + n] = s;
      }
  }
  return Tensor::from_vector<double>(out, out_shape);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Matmul, ValuesMatchNaiveAllTransposes) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const Tensor a = testing::randn(ta ? Shape{4, 3} : Shape{3, 4}, 1);
      const Tensor b = testing::randn(tb ? Shape{5, 4} : Shape{4, 5}, 2);
      EXPECT_TRUE(testing::all_close(matmul(a, b, ta, tb), naive_matmul(a, b, ta, tb), 1e-12, 1e-12))
          << "trans_a " << ta << " trans_b " << tb;
    }
}

TEST(Matmul, ValuesBatchedBroadcastAndFolds) {
  struct Case { Shape a, b; bool ta, tb; };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {2, 4, 5}, false, false},     // plain batch: loop of GEMMs
      {{2, 3, 4}, {4, 5}, false, false},        // shared b: batch folds into M
      {{2, 3, 4}, {5, 4}, false, true},         // Linear-like: folds into M with trans_b
      {{4, 3}, {2, 4, 5}, true, false},         // shared a: loop with a reused
      {{2, 1, 3, 4}, {5, 4, 6}, false, false},  // broadcast batch dims (2, 1) x (5)
      {{1, 3, 4}, {3, 6, 4}, false, true},      // size-1 batch dim broadcast
      {{2, 3, 4, 3}, {3, 4, 2}, true, false},   // 4-D with trans_a
  };
  for (const auto& c : cases) {
    const Tensor a = testing::randn(c.a, 3), b = testing::randn(c.b, 4);
    EXPECT_TRUE(testing::all_close(matmul(a, b, c.ta, c.tb), naive_matmul(a, b, c.ta, c.tb),
                                   1e-12, 1e-12))
        << shape_str(c.a) << " x " << shape_str(c.b);
  }
  // f32 too (the production dtype).
  const Tensor a = testing::randn({2, 7, 9}, 5, DType::F32), b = testing::randn({9, 6}, 6, DType::F32);
  EXPECT_TRUE(testing::all_close(matmul(a, b), naive_matmul(a, b, false, false), 1e-5, 1e-5));
}

TEST(Matmul, ViewsWithoutAndWithCopies) {
  const Tensor base = testing::randn({6, 5}, 7);
  const Tensor b = testing::randn({6, 4}, 8);
  // A transposed view is column-major: used through the BLAS flag.
  const Tensor at = base.transpose(0, 1);  // (5, 6)
  EXPECT_TRUE(testing::all_close(matmul(at, b), naive_matmul(at.contiguous(), b, false, false),
                                 1e-12, 1e-12));
  // Strided rows (a slice of every other row) keep a leading dimension > cols.
  const Tensor rows = base.slice(0, 0, 6, 2);  // (3, 5), row stride 10
  const Tensor c = testing::randn({5, 2}, 9);
  EXPECT_TRUE(testing::all_close(matmul(rows, c), naive_matmul(rows.contiguous(), c, false, false),
                                 1e-12, 1e-12));
  // A column slice with step 2 has no unit stride: copied once.
  const Tensor cols = base.slice(1, 0, 5, 2);  // (6, 3)
  const Tensor d = testing::randn({3, 2}, 10);
  EXPECT_TRUE(testing::all_close(matmul(cols, d), naive_matmul(cols.contiguous(), d, false, false),
                                 1e-12, 1e-12));
  // Empty inner dimension gives zeros.
  const Tensor e = matmul(Tensor::zeros({3, 0}, DType::F64), Tensor::zeros({0, 2}, DType::F64));
  EXPECT_EQ(e.shape(), (Shape{3, 2}));
  EXPECT_EQ(e.to_double_vector(), std::vector<double>(6, 0.0));
}

TEST(Matmul, GradcheckAllTransposes) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const Tensor a = testing::randn(ta ? Shape{4, 3} : Shape{3, 4}, 11);
      const Tensor b = testing::randn(tb ? Shape{5, 4} : Shape{4, 5}, 12);
      EXPECT_TRUE(testing::gradcheck([=](auto& v) { return matmul(v[0], v[1], ta, tb); }, {a, b}))
          << "trans_a " << ta << " trans_b " << tb;
    }
}

TEST(Matmul, GradcheckBatchedAndBroadcast) {
  struct Case { Shape a, b; bool ta, tb; };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {2, 4, 5}, false, false},
      {{2, 3, 4}, {4, 5}, false, false},       // b's gradient reduced over the batch (fold into K)
      {{2, 3, 4}, {5, 4}, false, true},        // Linear-like
      {{4, 3}, {2, 4, 5}, true, false},        // a's gradient reduced over the batch (loop)
      {{2, 1, 3, 4}, {3, 4, 2}, false, false}, // both broadcast
      {{2, 4, 3}, {1, 5, 4}, true, true},
  };
  for (const auto& c : cases) {
    const bool ta = c.ta, tb = c.tb;
    EXPECT_TRUE(testing::gradcheck([=](auto& v) { return matmul(v[0], v[1], ta, tb); },
                                   {testing::randn(c.a, 13), testing::randn(c.b, 14)}))
        << shape_str(c.a) << " x " << shape_str(c.b) << " ta " << ta << " tb " << tb;
  }
}

TEST(Matmul, GradcheckThroughViews) {
  // Transposed and permuted inputs reach the kernel as strided views.
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) { return matmul(v[0].transpose(0, 1), v[1].permute({0, 2, 1})); },
      {testing::randn({4, 3}, 15), testing::randn({2, 5, 4}, 16)}));
  // Same tensor on both sides: gradients from both uses accumulate.
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return matmul(v[0], v[0], false, true); },
                                 {testing::randn({3, 4}, 17)}));
}

TEST(Matmul, SavesOnlyWhatBackwardNeeds) {
  const int64_t before = autograd::saved_bytes();
  Tensor a = testing::randn({8, 16}, 18, DType::F32);
  Tensor b = testing::randn({16, 4}, 19, DType::F32);
  a.set_requires_grad(true);  // dA needs b only
  Tensor y = matmul(a, b);
  EXPECT_EQ(autograd::saved_bytes() - before, static_cast<int64_t>(b.nbytes()));
  y.backward(Tensor::ones(y.shape()));
  EXPECT_FALSE(b.grad().defined());
  EXPECT_TRUE(a.grad().defined());
  EXPECT_EQ(autograd::saved_bytes(), before);
}

TEST(Matmul, ErrorsNameShapesAndDtypes) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  std::string e = error_of([&] { matmul(a, b); });
  EXPECT_NE(e.find("(2, 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("(4, 5)"), std::string::npos) << e;
  e = error_of([&] { matmul(a, Tensor::zeros({3, 5}, DType::F64)); });
  EXPECT_NE(e.find("f32"), std::string::npos) << e;
  EXPECT_NE(e.find("f64"), std::string::npos) << e;
  EXPECT_NE(e.find("(3, 5)"), std::string::npos) << e;
  e = error_of([&] { matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4})); });
  EXPECT_NE(e.find("(2, 2, 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("(3, 3, 4)"), std::string::npos) << e;
  e = error_of([&] { matmul(Tensor::zeros({3}), Tensor::zeros({3, 4})); });
  EXPECT_NE(e.find("(3,)"), std::string::npos) << e;
  e = error_of([&] { matmul(Tensor::zeros({2, 3}, DType::I64), Tensor::zeros({3, 4}, DType::I64)); });
  EXPECT_NE(e.find("i64"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { matmul(a, Tensor()); }).find("<no error>"), std::string::npos);
}

// Reference y = x wᵀ + b from the naive matmul.
Tensor naive_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t I = x.shape().back();
  Tensor y = naive_matmul(x.reshape({-1, I}), w, false, true);
  if (b.defined()) y = add(y, b.to(DType::F64));
  Shape s = x.shape();
  s.back() = w.shape()[0];
  return y.reshape(s);
}

TEST(Linear, ValuesMatchNaive) {
  const Tensor w = testing::randn({5, 4}, 20), b = testing::randn({5}, 21);
  for (const Shape& xs : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}, Shape{2, 1, 3, 4}}) {
    const Tensor x = testing::randn(xs, 22);
    EXPECT_TRUE(testing::all_close(linear(x, w, b), naive_linear(x, w, b), 1e-12, 1e-12))
        << shape_str(xs);
    EXPECT_TRUE(testing::all_close(linear(x, w), naive_linear(x, w, Tensor()), 1e-12, 1e-12))
        << shape_str(xs);
  }
  // Non-contiguous x (leading dims permuted: the GEMM loops over them instead of copying).
  const Tensor xp = testing::randn({3, 2, 4}, 23).permute({1, 0, 2});
  EXPECT_TRUE(testing::all_close(linear(xp, w, b), naive_linear(xp.contiguous(), w, b), 1e-12, 1e-12));
  // A transposed weight view (column-major) is used through the BLAS flag.
  const Tensor wt = testing::randn({4, 5}, 24).transpose(0, 1);
  const Tensor x = testing::randn({3, 4}, 25);
  EXPECT_TRUE(testing::all_close(linear(x, wt, b), naive_linear(x, wt.contiguous(), b), 1e-12, 1e-12));
}

TEST(Linear, Gradcheck) {
  const Tensor w = testing::randn({5, 4}, 30), b = testing::randn({5}, 31);
  for (const Shape& xs : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
    const Tensor x = testing::randn(xs, 32);
    EXPECT_TRUE(testing::gradcheck([](auto& v) { return linear(v[0], v[1], v[2]); }, {x, w, b}))
        << shape_str(xs);
    EXPECT_TRUE(testing::gradcheck([](auto& v) { return linear(v[0], v[1]); }, {x, w}))
        << shape_str(xs);
  }
  // Permuted (non-foldable) leading dims: the GEMM loop path, gradients still reduced.
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) { return linear(v[0].permute({1, 0, 2}), v[1], v[2]); },
      {testing::randn({3, 2, 4}, 33), w, b}));
}

TEST(Linear, ComputesAndSavesOnlyWhatIsNeeded) {
  Tensor w = Tensor::empty({6, 8}, DType::F32, Device::cpu(), MemTag::Parameter);
  w.copy_(testing::randn({6, 8}, 40, DType::F32));
  Tensor b = Tensor::empty({6}, DType::F32, Device::cpu(), MemTag::Parameter);
  b.copy_(testing::randn({6}, 41, DType::F32));
  Tensor x = testing::randn({2, 3, 8}, 42, DType::F32);
  const int64_t before = autograd::saved_bytes();
  {  // Frozen weights, x requires grad: only w is saved (a parameter, so 0 saved bytes).
    Tensor xr = x.detach().set_requires_grad(true);
    Tensor y = linear(xr, w, b);
    EXPECT_EQ(autograd::saved_bytes() - before, 0);
    y.backward(Tensor::ones(y.shape()));
    EXPECT_TRUE(xr.grad().defined());
  }
  {  // Trainable weights, x a constant input: x is saved (its bytes), no g_x computed.
    w.set_requires_grad(true);
    b.set_requires_grad(true);
    Tensor y = linear(x, w, b);
    EXPECT_EQ(autograd::saved_bytes() - before, static_cast<int64_t>(x.nbytes()));
    y.backward(Tensor::ones(y.shape()));
    EXPECT_FALSE(x.grad().defined());
    ASSERT_TRUE(w.grad().defined());
    ASSERT_TRUE(b.grad().defined());
    // g_b of ones over 6 rows is 6 everywhere; g_w of ones is the column sums of x.
    EXPECT_EQ(b.grad().to_double_vector(), std::vector<double>(6, 6.0));
    const Tensor colsum = sum(x.reshape({6, 8}), {0});
    for (int64_t o = 0; o < 6; ++o)
      EXPECT_TRUE(testing::all_close(w.grad().select(0, o), colsum, 1e-5, 1e-5)) << o;
    EXPECT_EQ(autograd::saved_bytes(), before);
  }
}

TEST(Linear, ErrorsNameShapesAndDtypes) {
  const Tensor w = Tensor::zeros({5, 4});
  std::string e = error_of([&] { linear(Tensor::zeros({2, 3}), w); });
  EXPECT_NE(e.find("(2, 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("(5, 4)"), std::string::npos) << e;
  e = error_of([&] { linear(Tensor::zeros({2, 4}, DType::F64), w); });
  EXPECT_NE(e.find("f64"), std::string::npos) << e;
  EXPECT_NE(e.find("f32"), std::string::npos) << e;
  e = error_of([&] { linear(Tensor::zeros({2, 4}), w, Tensor::zeros({4})); });
  EXPECT_NE(e.find("(4,)"), std::string::npos) << e;
  EXPECT_NE(e.find("(5, 4)"), std::string::npos) << e;
  e = error_of([&] { linear(Tensor::zeros({2, 4}), Tensor::zeros({5, 4, 1})); });
  EXPECT_NE(e.find("(5, 4, 1)"), std::string::npos) << e;
}

TEST(Eigh, KnownEigenvalues) {
  // [[2, 1], [1, 2]] has eigenvalues 1 and 3 with eigenvectors (1, -1)/√2 and (1, 1)/√2.
  const Tensor a = Tensor::from_vector<double>({2, 1, 1, 2}, {2, 2});
  const EighResult r = eigh(a);
  EXPECT_TRUE(testing::all_close(r.eigenvalues, Tensor::from_vector<double>({1, 3}, {2}), 0, 1e-12));
  const auto v = r.eigenvectors.to_double_vector();
  EXPECT_NEAR(std::abs(v[0 * 2 + 1]), 1 / std::sqrt(2.0), 1e-12);  // column 1 ∝ (1, 1)
  EXPECT_NEAR(v[0 * 2 + 1], v[1 * 2 + 1], 1e-12);
  EXPECT_NEAR(v[0 * 2 + 0], -v[1 * 2 + 0], 1e-12);                 // column 0 ∝ (1, -1)
  // Diagonal with a repeated and a negative entry, f32: eigenvalues sorted ascending.
  const Tensor d = Tensor::from_vector<float>({3, 0, 0, 0, -1, 0, 0, 0, 3}, {3, 3});
  EXPECT_TRUE(testing::all_close(eigh(d).eigenvalues, Tensor::from_vector<float>({-1, 3, 3}, {3}),
                                 0, 1e-6));
  // Only the upper triangle is read (as torch.linalg.eigh(UPLO="U")).
  const Tensor upper = Tensor::from_vector<double>({2, 1, 99, 2}, {2, 2});
  EXPECT_TRUE(testing::all_close(eigh(upper).eigenvalues, Tensor::from_vector<double>({1, 3}, {2}),
                                 0, 1e-12));
}

TEST(Eigh, ReconstructsRandomSymmetric) {
  for (DType dt : {DType::F64, DType::F32}) {
    const int64_t n = 12;
    const Tensor r = testing::randn({n, n}, 50, dt);
    const Tensor a = add(r, r.transpose(0, 1));  // symmetric
    const EighResult e = eigh(a);
    const double tol = dt == DType::F64 ? 1e-10 : 2e-4;
    // a = V diag(λ) Vᵀ
    const Tensor vl = mul(e.eigenvectors, e.eigenvalues);  // scales column j by λ_j
    EXPECT_TRUE(testing::all_close(matmul(vl, e.eigenvectors, false, true), a, tol, tol));
    // Vᵀ V = I
    EXPECT_TRUE(testing::all_close(matmul(e.eigenvectors, e.eigenvectors, true, false),
                                   [&] {
                                     Tensor eye = Tensor::zeros({n, n}, dt);
                                     for (int64_t i = 0; i < n; ++i)
                                       eye.select(0, i).select(0, i).fill_(1.0);
                                     return eye;
                                   }(),
                                   tol, tol));
    const auto lam = e.eigenvalues.to_double_vector();
    for (int64_t i = 1; i < n; ++i) EXPECT_LE(lam[i - 1], lam[i]);
    // Trace is the sum of the eigenvalues (an independent check).
    double tr = 0, ls = 0;
    const auto av = a.to_double_vector();
    for (int64_t i = 0; i < n; ++i) tr += av[i * n + i], ls += lam[i];
    EXPECT_NEAR(tr, ls, tol * n * 10);
  }
}

TEST(Eigh, Errors) {
  std::string e = error_of([] { eigh(Tensor::zeros({2, 3})); });
  EXPECT_NE(e.find("(2, 3)"), std::string::npos) << e;
  e = error_of([] { eigh(Tensor::zeros({2, 2, 2})); });
  EXPECT_NE(e.find("(2, 2, 2)"), std::string::npos) << e;
  e = error_of([] { eigh(Tensor::zeros({2, 2}, DType::I32)); });
  EXPECT_NE(e.find("i32"), std::string::npos) << e;
  e = error_of([] { eigh(Tensor::from_vector<double>({1, NAN, NAN, 1}, {2, 2})); });
  EXPECT_NE(e.find("non-finite"), std::string::npos) << e;
  EXPECT_EQ(eigh(Tensor::zeros({0, 0})).eigenvalues.numel(), 0);
}

}  // namespace
}  // namespace lb
