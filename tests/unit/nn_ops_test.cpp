// NN ops (softmax, layer_norm, batch_norm, embedding, dropout, losses): finite-difference
// gradchecks in f64 for every differentiable argument, values against naive loops written
// here independently, running-stat updates, dropout statistics, saved bytes, error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Expects `f` to throw lb::Error whose message contains every string of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "': " << e.what();
  }
}

Tensor vec(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// ---------------------------------------------------------------- softmax

// Naive softmax along the last axis of a (R, L) tensor in double.
std::vector<double> naive_softmax(const std::vector<double>& z, int64_t R, int64_t L, bool log) {
  std::vector<double> out(z.size());
  for (int64_t r = 0; r < R; ++r) {
    double mx = -kInf;
    for (int64_t j = 0; j < L; ++j) mx = std::max(mx, z[r * L + j]);
    double s = 0;
    for (int64_t j = 0; j < L; ++j) s += std::exp(z[r * L + j] - mx);
    for (int64_t j = 0; j < L; ++j)
      out[r * L + j] = log ? z[r * L + j] - mx - std::log(s) : std::exp(z[r * L + j] - mx) / s;
  }
  return out;
}

TEST(Softmax, ValuesMatchNaive) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor x = mul_scalar(testing::randn({6, 37}, 1, dt), 3.0);
    const auto ref = naive_softmax(x.to_double_vector(), 6, 37, false);
    const auto lref = naive_softmax(x.to_double_vector(), 6, 37, true);
    const double tol = dt == DType::F32 ? 1e-6 : 1e-14;
    EXPECT_TRUE(testing::all_close(softmax(x, -1), vec(ref, {6, 37}), tol, tol));
    EXPECT_TRUE(testing::all_close(log_softmax(x, 1), vec(lref, {6, 37}), tol, 10 * tol));
  }
  // Large logits: stable (no inf/NaN).
  const Tensor big = Tensor::from_vector<float>({1000, 1000, -1000}, {1, 3});
  EXPECT_TRUE(testing::all_close(softmax(big, -1), vec({0.5, 0.5, 0}, {1, 3}), 0, 1e-7));
}

TEST(Softmax, OtherDimAndNonContiguousInput) {
  const Tensor x = testing::randn({3, 4, 5}, 2);
  // Along dim 1 == along the last dim of the permuted tensor.
  const Tensor a = softmax(x, 1);
  const Tensor b = softmax(x.transpose(1, 2), -1).transpose(1, 2);
  EXPECT_TRUE(testing::all_close(a, b, 1e-14, 1e-15));
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_EQ(a.shape(), x.shape());
  EXPECT_TRUE(testing::all_close(sum(a, {1}), Tensor::ones({3, 5}, DType::F64), 1e-14, 1e-14));
}

TEST(Softmax, MaskBroadcastsLikeAttention) {
  // scores (B, H, T, T) with a (B, 1, 1, T) key-padding mask.
  const int64_t B = 2, H = 3, T = 5;
  const Tensor x = testing::randn({B, H, T, T}, 3);
  std::vector<double> m(B * T, 0.0);
  m[0 * T + 4] = -1e4;  // batch 0: last key padded
  m[1 * T + 2] = -1e4;
  m[1 * T + 3] = -1e4;
  const Tensor mask = vec(m, {B, 1, 1, T});
  const Tensor y = softmax(x, -1, mask);
  const Tensor ref = softmax(add(x, mask), -1);
  EXPECT_TRUE(testing::all_close(y, ref, 1e-14, 1e-15));
  const Tensor ly = log_softmax(x, -1, mask);
  EXPECT_TRUE(testing::all_close(ly, log_softmax(add(x, mask), -1), 1e-14, 1e-12));
  // A lower-rank mask (T) broadcasts from the right.
  EXPECT_TRUE(testing::all_close(softmax(x, -1, vec(std::vector<double>(m.begin(), m.begin() + T), {T})),
                                 softmax(add(x, vec(std::vector<double>(m.begin(), m.begin() + T), {T})), -1),
                                 1e-14, 1e-15));
  // Along a non-last dim with a mask.
  const Tensor m2 = testing::randn({1, 3, 1, 1}, 4);
  EXPECT_TRUE(testing::all_close(softmax(x, 1, m2), softmax(add(x, m2), 1), 1e-14, 1e-15));
}

TEST(Softmax, NegInfMaskGivesExactZerosWithoutNaN) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor x = testing::randn({2, 2, 4, 4}, 5, dt);
    Tensor mask = Tensor::zeros({2, 1, 1, 4}, dt);
    {
      std::vector<double> m = {0, 0, -kInf, -kInf, -kInf, 0, -kInf, 0};
      mask.copy_(vec(m, {2, 1, 1, 4}));
    }
    const auto y = softmax(x, -1, mask).to_double_vector();
    const auto ly = log_softmax(x, -1, mask).to_double_vector();
    const auto mv = mask.to_double_vector();
    for (int64_t r = 0; r < 16; ++r) {
      double s = 0;
      for (int64_t j = 0; j < 4; ++j) {
        const double v = y[r * 4 + j];
        ASSERT_FALSE(std::isnan(v));
        const bool masked = std::isinf(mv[(r / 8) * 4 + j]);
        if (masked) {
          EXPECT_EQ(v, 0.0);
          EXPECT_EQ(ly[r * 4 + j], -kInf);
        } else {
          EXPECT_FALSE(std::isnan(ly[r * 4 + j]));
        }
        s += v;
      }
      EXPECT_NEAR(s, 1.0, 1e-6);
    }
  }
}

TEST(Softmax, FullyMaskedRowGivesZerosAndZeroGradient) {
  Tensor x = testing::randn({2, 3}, 6);
  x.set_requires_grad(true);
  const Tensor mask = vec({0, 0, 0, -kInf, -kInf, -kInf}, {2, 3});
  Tensor y = softmax(x, -1, mask);
  const auto v = y.to_double_vector();
  for (int j = 3; j < 6; ++j) EXPECT_EQ(v[j], 0.0);
  sum(mul(y, testing::randn({2, 3}, 7))).backward();
  const auto g = x.grad().to_double_vector();
  for (int j = 3; j < 6; ++j) EXPECT_EQ(g[j], 0.0);
  for (double gj : g) EXPECT_FALSE(std::isnan(gj));

  Tensor x2 = testing::randn({2, 3}, 6);
  x2.set_requires_grad(true);
  Tensor ly = log_softmax(x2, -1, mask);
  EXPECT_EQ(ly.to_double_vector()[4], -kInf);
  sum(mul(ly, vec({1, 1, 1, 0, 0, 0}, {2, 3}))).backward();
  const auto g2 = x2.grad().to_double_vector();
  for (int j = 3; j < 6; ++j) EXPECT_EQ(g2[j], 0.0);
}

TEST(Softmax, Gradcheck) {
  const Tensor x = testing::randn({2, 3, 4, 5}, 8);
  const Tensor mask = mul_scalar(testing::randn({2, 1, 1, 5}, 9), 2.0);
  const std::vector<std::pair<const char*, Fn>> x_only = {
      {"softmax last", [](auto& v) { return softmax(v[0], -1); }},
      {"softmax dim1", [](auto& v) { return softmax(v[0], 1); }},
      {"log_softmax last", [](auto& v) { return log_softmax(v[0], -1); }},
      {"log_softmax dim0", [](auto& v) { return log_softmax(v[0], 0); }},
  };
  for (auto& [name, f] : x_only) EXPECT_TRUE(testing::gradcheck(f, {x})) << name;
  // Masked, with the gradient of the (broadcast) mask too.
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return softmax(v[0], -1, v[1]); }, {x, mask}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return log_softmax(v[0], -1, v[1]); }, {x, mask}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return softmax(v[0], 2, v[1]); },
                                 {x, testing::randn({3, 4, 1}, 10)}));
  // -inf entries in the mask: x's gradient is still exact (0 at the masked entries).
  const Tensor inf_mask = vec({0, -kInf, 0, 0, -kInf, 0, 0, -kInf, 0, 0}, {2, 1, 1, 5});
  EXPECT_TRUE(testing::gradcheck([inf_mask](auto& v) { return softmax(v[0], -1, inf_mask); }, {x}));
  // (log_softmax is -inf at masked entries, so a finite-difference loss over it is not
  // defined; its masked gradient is checked in FullyMaskedRowGivesZerosAndZeroGradient.)
}

TEST(Softmax, SavesOnlyTheOutput) {
  Tensor x = testing::randn({4, 8}, 11);
  x.set_requires_grad(true);
  const int64_t before = autograd::saved_bytes();
  Tensor y = softmax(x, -1, testing::randn({8}, 12));
  EXPECT_EQ(autograd::saved_bytes() - before, 4 * 8 * 8);
}

TEST(Softmax, Errors) {
  const Tensor x = Tensor::zeros({2, 3, 4});
  expect_error([&] { softmax(x, -1, Tensor::zeros({3, 3})); }, {"softmax", "(3, 3)", "(2, 3, 4)"});
  expect_error([&] { softmax(x, -1, Tensor::zeros({4}, DType::F64)); }, {"f64", "f32"});
  expect_error([&] { log_softmax(x, 3); }, {});
  expect_error([&] { softmax(Tensor::zeros({2}, DType::I64), 0); }, {"softmax", "i64"});
  expect_error([&] { softmax(Tensor::scalar(1.0), 0); }, {"0-d"});
}

// ---------------------------------------------------------------- layer_norm

TEST(LayerNorm, ValuesMatchNaive) {
  for (DType dt : {DType::F32, DType::F64}) {
    const int64_t R = 6, C = 33;
    const Tensor x = add_scalar(mul_scalar(testing::randn({2, 3, C}, 20, dt), 2.0), 5.0);
    const Tensor w = testing::randn({C}, 21, dt), b = testing::randn({C}, 22, dt);
    const auto xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
    std::vector<double> ref(xv.size()), ref_plain(xv.size());
    for (int64_t r = 0; r < R; ++r) {
      double mu = 0, var = 0;
      for (int64_t j = 0; j < C; ++j) mu += xv[r * C + j] / C;
      for (int64_t j = 0; j < C; ++j) var += (xv[r * C + j] - mu) * (xv[r * C + j] - mu) / C;
      for (int64_t j = 0; j < C; ++j) {
        const double xh = (xv[r * C + j] - mu) / std::sqrt(var + 1e-5);
        ref[r * C + j] = xh * wv[j] + bv[j];
        ref_plain[r * C + j] = xh;
      }
    }
    const double tol = dt == DType::F32 ? 2e-5 : 1e-12;
    EXPECT_TRUE(testing::all_close(layer_norm(x, w, b), vec(ref, x.shape()), tol, tol));
    EXPECT_TRUE(
        testing::all_close(layer_norm(x, Tensor(), Tensor()), vec(ref_plain, x.shape()), tol, tol));
  }
}

TEST(LayerNorm, Gradcheck) {
  const Tensor x = testing::randn({2, 3, 7}, 23);
  const Tensor w = testing::randn({7}, 24), b = testing::randn({7}, 25);
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return layer_norm(v[0], v[1], v[2]); }, {x, w, b}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return layer_norm(v[0], Tensor(), Tensor()); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return layer_norm(v[0], v[1], Tensor(), 1e-3); },
                                 {x, w}));
  EXPECT_TRUE(testing::gradcheck([b](auto& v) { return layer_norm(v[0], Tensor(), b); }, {x}));
  // Only the parameters need a gradient (frozen input).
  EXPECT_TRUE(testing::gradcheck([x](auto& v) { return layer_norm(x, v[0], v[1]); }, {w, b}));
  // Non-contiguous input.
  const Tensor xt = testing::randn({7, 5}, 26);
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) { return layer_norm(v[0].transpose(0, 1), v[1], v[2]); }, {xt, w, b}));
}

TEST(LayerNorm, SavesInputMeanAndRstdOnly) {
  const int64_t R = 12, C = 16;
  Tensor x = testing::randn({3, 4, C}, 27);
  x.set_requires_grad(true);
  Tensor w = Tensor::empty({C}, DType::F64, Device::cpu(), MemTag::Parameter);
  w.copy_(testing::randn({C}, 28));
  w.set_requires_grad(true);
  Tensor b = Tensor::zeros({C}, DType::F64, Device::cpu(), MemTag::Parameter);
  b.set_requires_grad(true);
  const int64_t before = autograd::saved_bytes();
  Tensor y = layer_norm(x, w, b);
  EXPECT_EQ(autograd::saved_bytes() - before, (R * C + 2 * R) * 8);
}

TEST(LayerNorm, Errors) {
  const Tensor x = Tensor::zeros({2, 5});
  expect_error([&] { layer_norm(x, Tensor::ones({4}), Tensor()); }, {"weight", "(4,)", "(5,)", "(2, 5)"});
  expect_error([&] { layer_norm(x, Tensor(), Tensor::ones({5}, DType::F64)); }, {"bias", "f64"});
  expect_error([&] { layer_norm(Tensor::zeros({2, 0}), Tensor(), Tensor()); }, {"(2, 0)"});
  expect_error([&] { layer_norm(Tensor::zeros({2}, DType::I32), Tensor(), Tensor()); }, {"i32"});
}

// ---------------------------------------------------------------- batch_norm

// Naive per-channel statistics of x (N, C, S).
void naive_channel_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
  const auto v = x.to_double_vector();
  mean.assign(C, 0);
  var.assign(C, 0);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) mean[c] += v[(n * C + c) * S + s] / (N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const double d = v[(n * C + c) * S + s] - mean[c];
        var[c] += d * d / (N * S);
      }
  }
}

TEST(BatchNorm, TrainValuesAndRunningStats) {
  for (DType dt : {DType::F32, DType::F64}) {
    const int64_t N = 4, C = 3, S = 10;
    const Tensor x = add_scalar(testing::randn({N, C, 2, 5}, 30, dt), 1.5);
    const Tensor w = testing::randn({C}, 31, dt), b = testing::randn({C}, 32, dt);
    Tensor rm = vec({0.5, -0.5, 0.0}, {C}).to(dt);
    Tensor rv = vec({1.0, 2.0, 0.5}, {C}).to(dt);
    const auto rm0 = rm.to_double_vector(), rv0 = rv.to_double_vector();
    const Tensor y = batch_norm(x, w, b, rm, rv, true, 0.2, 1e-5);
    std::vector<double> mean, var;
    naive_channel_stats(x, mean, var);
    const auto xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
    std::vector<double> ref(xv.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t i = (n * C + c) * S + s;
          ref[i] = (xv[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * wv[c] + bv[c];
        }
    const double tol = dt == DType::F32 ? 2e-5 : 1e-12;
    EXPECT_TRUE(testing::all_close(y, vec(ref, x.shape()), tol, tol));
    // running = 0.8 running + 0.2 stat, variance unbiased (M / (M - 1), M = N S = 40).
    std::vector<double> em(C), ev(C);
    for (int64_t c = 0; c < C; ++c) {
      em[c] = 0.8 * rm0[c] + 0.2 * mean[c];
      ev[c] = 0.8 * rv0[c] + 0.2 * var[c] * 40.0 / 39.0;
    }
    EXPECT_TRUE(testing::all_close(rm, vec(em, {C}), tol, tol));
    EXPECT_TRUE(testing::all_close(rv, vec(ev, {C}), tol, tol));
  }
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  const Tensor x = testing::randn({3, 2, 4}, 33);
  const Tensor w = vec({2.0, -1.0}, {2}), b = vec({0.5, 0.25}, {2});
  Tensor rm = vec({0.3, -0.2}, {2}), rv = vec({1.5, 0.7}, {2});
  const Tensor y = batch_norm(x, w, b, rm, rv, false, 0.1, 1e-3);
  const auto xv = x.to_double_vector();
  std::vector<double> ref(xv.size());
  const double m[2] = {0.3, -0.2}, v[2] = {1.5, 0.7}, wv[2] = {2.0, -1.0}, bv[2] = {0.5, 0.25};
  for (size_t i = 0; i < xv.size(); ++i) {
    const int c = static_cast<int>((i / 4) % 2);
    ref[i] = (xv[i] - m[c]) / std::sqrt(v[c] + 1e-3) * wv[c] + bv[c];
  }
  EXPECT_TRUE(testing::all_close(y, vec(ref, x.shape()), 1e-13, 1e-13));
  EXPECT_EQ(rm.to_double_vector(), (std::vector<double>{0.3, -0.2}));
  EXPECT_EQ(rv.to_double_vector(), (std::vector<double>{1.5, 0.7}));
  // f32 running stats with f64 x are fine (mixed-precision buffers).
  Tensor rm32 = rm.to(DType::F32), rv32 = rv.to(DType::F32);
  EXPECT_TRUE(testing::all_close(batch_norm(x, w, b, rm32, rv32, false, 0.1, 1e-3),
                                 vec(ref, x.shape()), 1e-6, 1e-6));
}

TEST(BatchNorm, Gradcheck) {
  const Tensor x = testing::randn({3, 2, 2, 3}, 34);
  const Tensor w = testing::randn({2}, 35), b = testing::randn({2}, 36);
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) { return batch_norm(v[0], v[1], v[2], Tensor(), Tensor(), true); }, {x, w, b}));
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) { return batch_norm(v[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
      {x}));
  // (N, C) input, as BatchNorm1d.
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) { return batch_norm(v[0], v[1], v[2], Tensor(), Tensor(), true); },
      {testing::randn({5, 2}, 37), w, b}));
  // Eval mode: constants from the running statistics.
  const Tensor rm = vec({0.1, -0.3}, {2}), rv = vec({0.8, 1.7}, {2});
  EXPECT_TRUE(testing::gradcheck(
      [rm, rv](auto& v) { return batch_norm(v[0], v[1], v[2], rm, rv, false); }, {x, w, b}));
}

TEST(BatchNorm, Errors) {
  const Tensor x = Tensor::zeros({1, 3});
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true); },
               {"more than 1 value per channel", "(1, 3)"});
  expect_error([&] { batch_norm(Tensor::zeros({2, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); },
               {"running"});
  expect_error([&] { batch_norm(Tensor::zeros({2, 3}), Tensor::ones({2}), Tensor(), Tensor(), Tensor(), true); },
               {"weight", "(3,)", "(2,)"});
  expect_error([&] { batch_norm(Tensor::zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
               {"(N, C, ...)"});
}

// ---------------------------------------------------------------- embedding

TEST(Embedding, GathersRows) {
  const Tensor w = testing::randn({10, 4}, 40, DType::F32);
  for (DType it : {DType::I64, DType::I32}) {
    const Tensor idx = Tensor::from_vector<int64_t>({3, 0, 9, 3, 7, 1}, {2, 3}).to(it);
    const Tensor y = embedding(idx, w);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
    const auto yv = y.to_double_vector(), wv = w.to_double_vector();
    const int64_t ids[6] = {3, 0, 9, 3, 7, 1};
    for (int k = 0; k < 6; ++k)
      for (int j = 0; j < 4; ++j) EXPECT_EQ(yv[k * 4 + j], wv[ids[k] * 4 + j]);
  }
}

TEST(Embedding, GradcheckAndScatterAdd) {
  const Tensor idx = Tensor::from_vector<int64_t>({2, 4, 2, 0, 2, 1}, {3, 2});
  EXPECT_TRUE(testing::gradcheck([idx](auto& v) { return embedding(idx, v[0]); },
                                 {testing::randn({6, 3}, 41)}));
  EXPECT_TRUE(testing::gradcheck([idx](auto& v) { return embedding(idx.to(DType::I32), v[0]); },
                                 {testing::randn({5, 2}, 42)}));
  // padding_idx: the row is still read, but gets no gradient; repeated indices accumulate.
  Tensor w = testing::randn({6, 3}, 43);
  w.set_requires_grad(true);
  Tensor y = embedding(idx, w, /*padding_idx=*/2);
  EXPECT_EQ(y.to_double_vector()[0], w.to_double_vector()[6]);
  sum(y).backward();
  const auto g = w.grad().to_double_vector();
  const double counts[6] = {1, 1, 0, 0, 1, 0};  // row 2 (3 uses) is padding
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(g[r * 3 + j], counts[r]) << r;
}

TEST(Embedding, ParallelBackwardMatchesSerialSum) {
  // Large enough for the threaded path; every row's gradient = Σ of its occurrences.
  const int64_t V = 50, D = 64, n = 2000;
  std::vector<int64_t> ids(n);
  for (int64_t k = 0; k < n; ++k) ids[k] = (k * 7919) % V;
  const Tensor idx = Tensor::from_vector(ids, {n});
  Tensor w = Tensor::zeros({V, D});
  w.set_requires_grad(true);
  const Tensor r = testing::randn({n, D}, 44, DType::F32);
  sum(mul(embedding(idx, w), r)).backward();
  std::vector<double> ref(V * D, 0.0);
  const auto rv = r.to_double_vector();
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < D; ++j) ref[ids[k] * D + j] += rv[k * D + j];
  EXPECT_TRUE(testing::all_close(w.grad(), vec(ref, {V, D}), 1e-5, 1e-5));
}

TEST(Embedding, SavesOnlyIndices) {
  const Tensor idx = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  Tensor w = Tensor::empty({8, 16}, DType::F32, Device::cpu(), MemTag::Parameter);
  w.fill_(1.0);
  w.set_requires_grad(true);
  const int64_t before = autograd::saved_bytes();
  Tensor y = embedding(idx, w);
  EXPECT_EQ(autograd::saved_bytes() - before, 3 * 8);
}

TEST(Embedding, Errors) {
  const Tensor w = Tensor::zeros({30522, 4});
  expect_error([&] { embedding(Tensor::from_vector<int64_t>({5, 30522}, {2}), w); },
               {"30522", "vocabulary of size 30522", "position 1"});
  expect_error([&] { embedding(Tensor::from_vector<int32_t>({-1}, {1}), w); }, {"index -1"});
  expect_error([&] { embedding(Tensor::zeros({2}), w); }, {"i32 or i64", "f32"});
  expect_error([&] { embedding(Tensor::from_vector<int64_t>({1}, {1}), Tensor::zeros({4})); },
               {"(V, D)"});
  expect_error([&] { embedding(Tensor::from_vector<int64_t>({1}, {1}), w, 30522); },
               {"padding_idx"});
}

// ---------------------------------------------------------------- dropout

TEST(Dropout, IdentityWhenOffAndDrawsNothing) {
  const Tensor x = testing::randn({3, 4}, 50, DType::F32);
  PhiloxStream rng(7);
  EXPECT_TRUE(dropout(x, 0.5, false, rng).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, rng).same(x));
  EXPECT_EQ(rng.offset(), 0u);
  EXPECT_EQ(sum(dropout(x, 1.0, true, rng)).item<float>(), 0.0f);
  expect_error([&] { dropout(x, 1.5, true, rng); }, {"[0, 1]", "1.5"});
  expect_error([&] { dropout(x, -0.1, true, rng); }, {"-0.1"});
}

TEST(Dropout, StatisticsAndScaling) {
  const int64_t n = 200003;  // not a multiple of 8 or of the chunk size
  const Tensor x = add_scalar(testing::rand({n}, 51, 0.5, 1.5, DType::F32), 0.0);
  for (double p : {0.1, 0.5, 0.9}) {
    PhiloxStream rng(123);
    const Tensor y = dropout(x, p, true, rng);
    EXPECT_EQ(rng.offset(), static_cast<uint64_t>(n));
    const auto xv = x.to_double_vector(), yv = y.to_double_vector();
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (yv[i] != 0) {
        ++kept;
        ASSERT_EQ(static_cast<float>(yv[i]), static_cast<float>(xv[i]) * static_cast<float>(1.0 / (1.0 - p)));
      }
    }
    const double frac = static_cast<double>(kept) / n;
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_LT(std::abs(frac - (1 - p)), 5 * sigma) << "p=" << p << " kept " << frac;
  }
}

TEST(Dropout, MaskFollowsThePhiloxStreamInOrder) {
  // Element i is kept iff the stream's i-th uniform (continuing from its current position,
  // here not a multiple of 4) exceeds p; the stream ends exactly after those draws.
  const int64_t n = 20000;
  const double p = 0.3;
  const Tensor x = Tensor::ones({100, n / 100});
  PhiloxStream a(99, 3), b(99, 3);
  for (int k = 0; k < 5; ++k) {
    a.next_u32();
    b.next_u32();
  }
  const auto y = dropout(x, p, true, a).to_double_vector();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i] != 0, b.uniform() > static_cast<float>(p)) << i;
  EXPECT_EQ(a.offset(), b.offset());
  EXPECT_EQ(a.next_u32(), b.next_u32());
}

TEST(Dropout, SameSeedSameMaskAndFreshDrawsDiffer) {
  const Tensor x = Tensor::ones({64, 33});
  PhiloxStream a(5), b(5), c(6);
  const Tensor ya = dropout(x, 0.5, true, a), yb = dropout(x, 0.5, true, b);
  EXPECT_EQ(ya.to_double_vector(), yb.to_double_vector());
  EXPECT_NE(ya.to_double_vector(), dropout(x, 0.5, true, c).to_double_vector());
  EXPECT_NE(ya.to_double_vector(), dropout(x, 0.5, true, a).to_double_vector());
}

TEST(Dropout, GradcheckAndBackwardUsesTheForwardMask) {
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) {
        PhiloxStream rng(17);  // fresh per call: the same mask each evaluation
        return dropout(v[0], 0.4, true, rng);
      },
      {testing::randn({5, 7}, 52)}));
  // Several of the kernels' chunks (8192 elements) and a last byte half full.
  const int64_t n = 20004;
  Tensor x = testing::randn({n}, 53, DType::F32);
  x.set_requires_grad(true);
  PhiloxStream rng(1);
  Tensor y = dropout(x, 0.25, true, rng);
  sum(y).backward();
  const auto yv = y.to_double_vector(), gv = x.grad().to_double_vector();
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(gv[i], yv[i] != 0 ? static_cast<double>(static_cast<float>(1 / 0.75)) : 0.0);
}

TEST(Dropout, SavesABitPackedMask) {
  Tensor x = testing::randn({10, 101}, 54, DType::F32);
  x.set_requires_grad(true);
  PhiloxStream rng(2);
  const int64_t before = autograd::saved_bytes();
  Tensor y = dropout(x, 0.1, true, rng);
  EXPECT_EQ(autograd::saved_bytes() - before, (1010 + 7) / 8);
}

// dropout_linear is dropout then linear in one node: its goldens are those two ops' (it must
// equal them bit for bit), its own checks are finite differences and what it keeps.
TEST(DropoutLinear, EqualsDropoutThenLinearBitForBit) {
  // Small, and LoRA-sized (the GEMMs' blocked paths: 4 × 64 rows of 384 onto rank 8).
  for (const Shape& xs : {Shape{3, 4, 12}, Shape{4, 64, 384}}) {
    const int64_t I = xs.back(), O = I > 100 ? 8 : 5;
    const Tensor w0 = testing::randn({O, I}, 60, DType::F32);
    const Tensor gy = testing::randn({xs[0], xs[1], O}, 61, DType::F32);
    const Tensor gamma = testing::randn({I}, 62, DType::F32), beta = testing::randn({I}, 63, DType::F32);
    for (bool producer : {false, true}) {  // x a leaf, or a LayerNorm's output (exact lean)
      struct Out {
        Tensor y, gx, gw;
      };
      const auto run = [&](bool fused) {
        Tensor x = testing::randn(xs, 64, DType::F32).set_requires_grad(), w = w0.clone().set_requires_grad();
        const Tensor in = producer ? layer_norm(x, gamma, beta) : x;
        PhiloxStream rng(8, 2);
        const Tensor y = fused ? dropout_linear(in, w, 0.3, true, rng) : linear(dropout(in, 0.3, true, rng), w);
        EXPECT_EQ(rng.offset(), static_cast<uint64_t>(x.numel()));
        y.backward(gy);
        return Out{y.detach(), x.grad(), w.grad()};
      };
      const Out a = run(true), b = run(false);
      EXPECT_TRUE(testing::all_close(a.y, b.y, 0, 0)) << producer << " " << I;
      EXPECT_TRUE(testing::all_close(a.gx, b.gx, 0, 0)) << producer << " " << I;
      EXPECT_TRUE(testing::all_close(a.gw, b.gw, 0, 0)) << producer << " " << I;
    }
  }
  const Tensor w0 = testing::randn({5, 12}, 60, DType::F32);
  PhiloxStream rng(1);
  const Tensor x = testing::randn({2, 12}, 65, DType::F32);
  EXPECT_TRUE(testing::all_close(dropout_linear(x, w0, 0.3, false, rng), linear(x, w0), 0, 0));
  EXPECT_EQ(rng.offset(), 0u);  // off: no draws
  expect_error([&] { dropout_linear(x, w0, 1.5, true, rng); }, {"dropout_linear", "[0, 1]"});
  expect_error([&] { dropout_linear(x, testing::randn({5, 7}, 66, DType::F32), 0.3, true, rng); }, {"linear"});
}

TEST(DropoutLinear, Gradcheck) {
  EXPECT_TRUE(testing::gradcheck(
      [](auto& v) {
        PhiloxStream rng(17);  // fresh per call: the same mask each evaluation
        return dropout_linear(v[0], v[1], 0.4, true, rng);
      },
      {testing::randn({2, 3, 6}, 67), testing::randn({4, 6}, 68)}));
}

// Adapters on one input that needs no gradient (a frozen model's first layer) keep that
// input once and a mask each, where dropout then linear keeps a dropped-out copy each.
TEST(DropoutLinear, KeepsItsInputOnceAcrossConsumers) {
  const Tensor x = testing::randn({4, 16, 32}, 69, DType::F32);
  const Tensor wq = testing::randn({8, 32}, 70, DType::F32).set_requires_grad();
  const Tensor wv = testing::randn({8, 32}, 71, DType::F32).set_requires_grad();
  const int64_t activation = 4 * 16 * 32 * 4, mask = 4 * 16 * 32 / 8;
  PhiloxStream rng(3);
  int64_t before = autograd::saved_bytes();
  Tensor q = dropout_linear(x, wq, 0.1, true, rng), v = dropout_linear(x, wv, 0.1, true, rng);
  EXPECT_EQ(autograd::saved_bytes() - before, activation + 2 * mask);
  q = v = Tensor();
  before = autograd::saved_bytes();
  q = linear(dropout(x, 0.1, true, rng), wq);
  v = linear(dropout(x, 0.1, true, rng), wv);
  EXPECT_EQ(autograd::saved_bytes() - before, 2 * activation);
}

// ---------------------------------------------------------------- cross_entropy

// Independent reference: -Σ_valid [(1-ε) logp_t + (ε/C) Σ_j logp_j] / V.
double naive_cross_entropy(const Tensor& logits, const std::vector<int64_t>& t, int64_t ignore,
                           double eps) {
  const int64_t N = logits.size(0), C = logits.size(1);
  const auto lp = naive_softmax(logits.to_double_vector(), N, C, true);
  double total = 0;
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (t[i] == ignore) continue;
    ++valid;
    double smooth = 0;
    for (int64_t j = 0; j < C; ++j) smooth += lp[i * C + j];
    total += -(1 - eps) * lp[i * C + t[i]] - eps * smooth / C;
  }
  return total / valid;
}

TEST(CrossEntropy, ValuesMatchNaive) {
  const std::vector<int64_t> t = {2, -100, 0, 4, 4, -100, 1};
  const Tensor tt = Tensor::from_vector(t, {7});
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor x = mul_scalar(testing::randn({7, 5}, 60, dt), 2.0);
    const double tol = dt == DType::F32 ? 1e-5 : 1e-13;
    for (double eps : {0.0, 0.1, 1.0}) {
      EXPECT_NEAR(cross_entropy(x, tt, -100, eps).item_double(),
                  naive_cross_entropy(x, t, -100, eps), tol)
          << eps;
    }
    // Another ignore_index value, and i32 targets.
    const std::vector<int64_t> t4 = {2, 4, 0, 4, 3, 4, 1};
    EXPECT_NEAR(cross_entropy(x, Tensor::from_vector(t4, {7}).to(DType::I32), 4, 0.2).item_double(),
                naive_cross_entropy(x, t4, 4, 0.2), tol);
  }
  // Matches the unfused composition -mean(log_softmax gathered).
  const Tensor x = testing::randn({4, 3}, 61);
  const Tensor ls = log_softmax(x, -1);
  const auto lv = ls.to_double_vector();
  const int64_t ti[4] = {0, 2, 1, 1};
  double ref = 0;
  for (int i = 0; i < 4; ++i) ref -= lv[i * 3 + ti[i]] / 4;
  EXPECT_NEAR(
      cross_entropy(x, Tensor::from_vector<int64_t>({0, 2, 1, 1}, {4})).item_double(), ref, 1e-14);
}

TEST(CrossEntropy, Gradcheck) {
  const Tensor x = testing::randn({6, 4}, 62);
  const Tensor t = Tensor::from_vector<int64_t>({1, 3, 0, 0, 2, 1}, {6});
  const Tensor ti = Tensor::from_vector<int64_t>({1, -100, 0, 3, -100, 2}, {6});
  EXPECT_TRUE(testing::gradcheck([t](auto& v) { return cross_entropy(v[0], t); }, {x}));
  EXPECT_TRUE(testing::gradcheck([ti](auto& v) { return cross_entropy(v[0], ti, -100, 0.1); }, {x}));
  const Tensor t3 = Tensor::from_vector<int64_t>({1, 3, 0, 3, 2, 2}, {6});
  EXPECT_TRUE(testing::gradcheck([t3](auto& v) { return cross_entropy(v[0], t3, 3, 0.25); }, {x}));
  // Non-contiguous logits.
  EXPECT_TRUE(testing::gradcheck(
      [ti](auto& v) { return cross_entropy(v[0].transpose(0, 1), ti, -100, 0.1); },
      {testing::randn({4, 6}, 63)}));
}

TEST(CrossEntropy, AllIgnoredGivesZeroLossAndGradient) {
  Tensor x = testing::randn({3, 4}, 64);
  x.set_requires_grad(true);
  Tensor loss = cross_entropy(x, Tensor::from_vector<int64_t>({-100, -100, -100}, {3}));
  EXPECT_EQ(loss.item_double(), 0.0);
  loss.backward();
  for (double g : x.grad().to_double_vector()) EXPECT_EQ(g, 0.0);
}

TEST(CrossEntropy, SavesLogitsLseAndTargets) {
  Tensor x = testing::randn({8, 50}, 65, DType::F32);
  x.set_requires_grad(true);
  const Tensor t = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  const int64_t before = autograd::saved_bytes();
  Tensor loss = cross_entropy(x, t, -100, 0.1);
  EXPECT_EQ(autograd::saved_bytes() - before, 8 * 50 * 4 + 8 * 4 + 8 * 8);
}

TEST(CrossEntropy, Errors) {
  const Tensor x = Tensor::zeros({2, 5});
  expect_error([&] { cross_entropy(x, Tensor::from_vector<int64_t>({1, 5}, {2})); },
               {"target 5", "row 1", "5 classes"});
  expect_error([&] { cross_entropy(x, Tensor::from_vector<int64_t>({1, -1}, {2})); },
               {"target -1"});
  expect_error([&] { cross_entropy(x, Tensor::zeros({2})); }, {"i64", "f32"});
  expect_error([&] { cross_entropy(x, Tensor::from_vector<int64_t>({1, 2, 3}, {3})); },
               {"(2,)", "(3,)"});
  expect_error([&] { cross_entropy(Tensor::zeros({2, 3, 4}), Tensor::from_vector<int64_t>({1, 2}, {2})); },
               {"(N, C)", "(2, 3, 4)"});
  expect_error([&] { cross_entropy(x, Tensor::from_vector<int64_t>({1, 2}, {2}), -100, 1.5); },
               {"label_smoothing"});
}

// ---------------------------------------------------------------- mse_loss

TEST(MseLoss, ValuesGradcheckErrors) {
  const Tensor a = vec({1, 2, 3, 4}, {2, 2}), b = vec({0, 2, 5, 1}, {2, 2});
  EXPECT_DOUBLE_EQ(mse_loss(a, b).item_double(), (1.0 + 0 + 4 + 9) / 4);
  EXPECT_EQ(mse_loss(a, b).dim(), 0);
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return mse_loss(v[0], v[1]); },
                                 {testing::randn({3, 5}, 70), testing::randn({3, 5}, 71)}));
  EXPECT_TRUE(testing::gradcheck([b](auto& v) { return mse_loss(v[0], b); }, {a}));
  expect_error([&] { mse_loss(a, vec({1, 2, 3, 4}, {4})); }, {"(2, 2)", "(4,)"});
  expect_error([&] { mse_loss(a, a.to(DType::F32)); }, {"f32", "f64"});
}

}  // namespace
}  // namespace lb
