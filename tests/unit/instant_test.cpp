// INSTANT strategy, its maths: lossless settings equal vanilla (Linear token/channel/mixed
// axes, Conv2d 1×1 and 3×3), the low-rank backward equals its defining formulas
// (g_w = Σ g_yᵀPᵀP x, g_x = QᵀQ g_y w) computed independently, variable lengths and packed
// sequences, shared projections. Its calibration and accounting: instant_calibration_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/autograd/node.h"
#include "lb/core/random.h"
#include "lb/nn/backward/calibration.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/instant.h"
#include "lb/nn/attention.h"
#include "lb/nn/backward/policy.h"
#include "lb/nn/layers.h"
#include "lb/ops.h"
#include "lb/optim/optimizer.h"
#include "src/backend/lowrank.h"
#include "testing/strategies.h"
#include "testing/testing.h"

namespace lb::nn::backward {
namespace {

using testing::calibrate;
using testing::expect_equal_grads;
using testing::Grads;
using testing::kLossless;
using testing::run_conv;
using testing::run_linear;

std::shared_ptr<Instant> instant(const nlohmann::json& spec) { return testing::make_instant(spec); }


TEST(Instant, LosslessLinearEqualsVanilla) {
  std::shared_ptr<Strategy> vanilla = make_strategy({{"type", "vanilla"}}, "test");
  // (B, L, I, O) with the axis each tensor takes under "auto": token when L <= channels.
  struct Case {
    const char* axis;
    int64_t B, L, I, O;
    const char* x_axis;
    const char* g_axis;
  };
  for (const Case& c : {Case{"token", 3, 6, 10, 12, "token", "token"},
                        Case{"channel", 4, 9, 5, 7, "channel", "channel"},
                        Case{"auto", 3, 8, 11, 5, "token", "channel"},
                        Case{"auto", 3, 8, 5, 11, "channel", "token"}}) {
    for (DType dt : {DType::F32, DType::F64}) {
      nlohmann::json spec = kLossless;
      spec["axis"] = c.axis;
      spec["gram_dtype"] = dt == DType::F64 ? "f64" : "f32";  // f64 bases for f64 tolerances
      auto s = instant(spec);
      const Tensor w = testing::randn({c.O, c.I}, 2, dt), b = testing::randn({c.O}, 3, dt);
      calibrate(s, [&] {
        run_linear(s, testing::randn({c.B, c.L, c.I}, 10, dt), w, b, testing::randn({c.B, c.L, c.O}, 11, dt));
      });
      ASSERT_TRUE(s->compresses({c.B, c.L, c.I, c.O}));
      EXPECT_EQ(s->x_basis().token_axis, std::string(c.x_axis) == "token");
      EXPECT_EQ(s->g_basis().token_axis, std::string(c.g_axis) == "token");
      const Tensor x = testing::randn({c.B, c.L, c.I}, 20, dt), g = testing::randn({c.B, c.L, c.O}, 21, dt);
      const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
      expect_equal_grads(run_linear(s, x, w, b, g), run_linear(vanilla, x, w, b, g), tol, tol, c.axis);
    }
  }
}

TEST(Instant, LosslessGradcheckF64) {
  // At full rank the low-rank backward is the true gradient: finite differences agree.
  for (const char* axis : {"token", "channel"}) {
    nlohmann::json spec = kLossless;
    spec["axis"] = axis;
    spec["gram_dtype"] = "f64";
    auto s = instant(spec);
    const Tensor w = testing::randn({5, 4}, 2), b = testing::randn({5}, 3);
    calibrate(s, [&] { run_linear(s, testing::randn({2, 3, 4}, 4), w, b, testing::randn({2, 3, 5}, 5)); });
    EXPECT_TRUE(testing::gradcheck(
        [s](const std::vector<Tensor>& in) { return strategy_linear(in[0], in[1], in[2], s); },
        {testing::randn({2, 3, 4}, 6), w, b}))
        << axis;
  }
}

TEST(Instant, LosslessConvEqualsVanilla) {
  std::shared_ptr<Strategy> vanilla = make_strategy({{"type", "vanilla"}}, "test");
  struct Case {
    int64_t k, stride, pad;
  };
  for (const Case& c : {Case{1, 1, 0}, Case{3, 1, 1}, Case{3, 2, 1}}) {
    for (const char* axis : {"token", "channel"}) {
      Conv2dArgs a;
      a.stride = {c.stride, c.stride};
      a.padding = {c.pad, c.pad};
      nlohmann::json spec = kLossless;
      spec["axis"] = axis;
      auto s = instant(spec);
      const Tensor w = testing::randn({6, 4, c.k, c.k}, 1, DType::F32), b = testing::randn({6}, 2, DType::F32);
      const int64_t Ho = (7 + 2 * c.pad - c.k) / c.stride + 1;
      auto g_of = [&](uint64_t seed) { return testing::randn({2, 6, Ho, Ho}, seed, DType::F32); };
      calibrate(s, [&] { run_conv(s, testing::randn({2, 4, 7, 7}, 3, DType::F32), w, b, g_of(4), a); });
      const Tensor x = testing::randn({2, 4, 7, 7}, 5, DType::F32), g = g_of(6);
      ASSERT_TRUE(s->report()["instant"]["compressing"].get<bool>());
      expect_equal_grads(run_conv(s, x, w, b, g, a), run_conv(vanilla, x, w, b, g, a), 1e-4, 1e-4, axis);
    }
  }
}

// The low-rank backward against its definition, computed with plain matmuls in f64, at ranks
// that exercise the kernels' row blocks (R not a multiple of 8) and column tails.
TEST(Instant, LowRankMatchesDefinition) {
  struct Size {
    int64_t B, L, I, O;
  };
  // The second size is large enough for the kernels' parallel path.
  for (const Size& size : {Size{3, 20, 37, 45}, Size{8, 64, 520, 300}})
  for (const char* axis : {"token", "channel"})
    for (int64_t rank : {5, 11}) {
      const int64_t B = size.B, L = size.L, I = size.I, O = size.O;  // lambdas capture these
      // (exact_when_no_gain off: rank 11 on the small size would cost more than exact)
      auto s = instant({{"axis", axis}, {"rank", rank}, {"gram_dtype", "f64"}, {"exact_when_no_gain", false}});
      const Tensor w = testing::randn({O, I}, 2), b = testing::randn({O}, 3);
      calibrate(s, [&] { run_linear(s, testing::randn({B, L, I}, 4), w, b, testing::randn({B, L, O}, 5)); });
      const Tensor x = testing::randn({B, L, I}, 6), g = testing::randn({B, L, O}, 7);
      const Grads got = run_linear(s, x, w, b, g);
      const Tensor P = s->x_basis().proj, Q = s->g_basis().proj;
      ASSERT_EQ(P.size(0), rank);
      ASSERT_EQ(Q.size(0), rank);
      Tensor gw_ref, gx_ref;
      const Tensor PtP = matmul(P, P, true, false), QtQ = matmul(Q, Q, true, false);
      if (std::string(axis) == "token") {  // PᵀP (L, L) acts on the token axis
        gw_ref = matmul(g.reshape({B * L, O}), matmul(PtP, x).reshape({B * L, I}), true, false);
        gx_ref = matmul(matmul(QtQ, g), w);
      } else {  // PᵀP (I, I) on x's channels, QᵀQ (O, O) on g_y's
        gw_ref = matmul(g.reshape({B * L, O}), matmul(x, PtP).reshape({B * L, I}), true, false);
        gx_ref = matmul(matmul(g, QtQ), w);
      }
      EXPECT_TRUE(testing::all_close(got.gw, gw_ref, 1e-10, 1e-10)) << axis << " rank " << rank;
      EXPECT_TRUE(testing::all_close(got.gx, gx_ref, 1e-10, 1e-10)) << axis << " rank " << rank;
      EXPECT_TRUE(testing::all_close(got.gb, sum(g, {0, 1}), 1e-12, 1e-12));  // bias stays exact
    }
}

// Conv2d at low rank against the definition on the im2col view: g_w = Gᵀ X_col PᵀP (channel)
// or Σ_n G_nᵀ PᵀP X_col,n (token), g_x = col2im(QᵀQ-projected G · w). The channel axis runs
// the convolution-with-P save and the per-image col2im backward.
TEST(Instant, LowRankConvMatchesDefinition) {
  struct Case {
    const char* axis;
    int64_t C, HW, O, k, stride, pad;  // x (N, C, HW, HW), w (O, C, k, k)
    bool x_token, g_token;              // expected axes
  };
  for (const Case& c : {Case{"token", 4, 9, 6, 3, 2, 1, true, true},
                        Case{"channel", 4, 9, 6, 3, 2, 1, false, false},
                        Case{"auto", 4, 6, 40, 1, 1, 0, false, true},   // I = 4 < L = 36 <= O
                        Case{"auto", 8, 6, 6, 3, 1, 1, true, false}}) {  // L = 36 <= I = 72, O < L
    Conv2dArgs a;
    a.padding = {c.pad, c.pad};
    a.stride = {c.stride, c.stride};
    ConvGeometry cg;
    const int64_t N = 3, Ho = (c.HW + 2 * c.pad - c.k) / c.stride + 1, L = Ho * Ho, I = c.C * c.k * c.k;
    cg.x_shape = {N, c.C, c.HW, c.HW};
    cg.kH = cg.kW = c.k;
    cg.args = a;
    cg.Ho = cg.Wo = Ho;
    const std::string what = std::string(c.axis) + " C " + std::to_string(c.C) + " O " + std::to_string(c.O);
    auto s = instant({{"axis", c.axis}, {"rank", 3}, {"gram_dtype", "f64"}});
    const Tensor w = testing::randn({c.O, c.C, c.k, c.k}, 1), b = testing::randn({c.O}, 2);
    calibrate(s, [&] { run_conv(s, testing::randn(cg.x_shape, 3), w, b, testing::randn({N, c.O, Ho, Ho}, 4), a); });
    ASSERT_EQ(s->x_basis().token_axis, c.x_token) << what;
    ASSERT_EQ(s->g_basis().token_axis, c.g_token) << what;
    const Tensor x = testing::randn(cg.x_shape, 5), g = testing::randn({N, c.O, Ho, Ho}, 6);
    const Grads got = run_conv(s, x, w, b, g, a);
    const Tensor X = conv_to_tokens(x, cg);                                        // (N, L, I)
    const Tensor G = g.reshape({N, c.O, L}).transpose(1, 2).contiguous();         // (N, L, O)
    const Tensor PtP = matmul(s->x_basis().proj, s->x_basis().proj, true, false);
    const Tensor QtQ = matmul(s->g_basis().proj, s->g_basis().proj, true, false);
    const Tensor Xp = c.x_token ? matmul(PtP, X) : matmul(X, PtP);
    const Tensor Gq = c.g_token ? matmul(QtQ, G) : matmul(G, QtQ);
    const Tensor gw_ref = matmul(G.reshape({N * L, c.O}), Xp.reshape({N * L, I}), true, false).reshape(w.shape());
    const Tensor gx_ref = conv_from_tokens(matmul(Gq, w.reshape({c.O, I})), cg);
    EXPECT_TRUE(testing::all_close(got.gw, gw_ref, 1e-10, 1e-10)) << what;
    EXPECT_TRUE(testing::all_close(got.gx, gx_ref, 1e-10, 1e-10)) << what;
    EXPECT_TRUE(testing::all_close(got.gb, sum(g, {0, 2, 3}), 1e-12, 1e-12)) << what;
    // Saved: x̂ (R_x, N, I) on the token axis, X̂ (N, R_x, L) on the channel axis (f64 here).
    Tensor xi = x.clone(), wi = w.clone();
    xi.set_requires_grad();
    wi.storage()->set_tag(MemTag::Parameter);
    wi.set_requires_grad();
    Tensor y = strategy_conv2d(xi, wi, Tensor(), a, s);
    EXPECT_EQ(autograd::saved_bytes(), (c.x_token ? 3 * N * I : N * L * 3) * 8) << what;
    EXPECT_EQ(s->paper_saved_bytes_fp32({N, L, I, c.O}) * N * 2, autograd::saved_bytes()) << what;
    y.backward(g);
    // Only the frozen-input case: no g_x wanted.
    Tensor wj = w.clone();
    wj.set_requires_grad();
    strategy_conv2d(x, wj, Tensor(), a, s).backward(g);
    EXPECT_TRUE(testing::all_close(wj.grad(), gw_ref, 1e-10, 1e-10)) << what;
  }
}

TEST(Instant, ConvCalibrationFromImagesEqualsTheTokenView) {
  // A conv calibrates from each image's im2col columns and its output-gradient image; a Linear
  // calibrated on the same data as tokens (N, L, I) / (N, L, O) must get the same bases:
  // equal projectors PᵀP and QᵀQ (sign-free) and ranks, on both axes.
  for (const char* axis : {"token", "channel"}) {
    SCOPED_TRACE(axis);
    Conv2dArgs a;
    a.padding = {1, 1};
    a.stride = {2, 2};
    ConvGeometry cg;
    const int64_t N = 3, C = 4, HW = 9, O = 6, Ho = 5, L = Ho * Ho, I = C * 9;
    cg.x_shape = {N, C, HW, HW};
    cg.kH = cg.kW = 3;
    cg.args = a;
    cg.Ho = cg.Wo = Ho;
    const nlohmann::json spec = {{"axis", axis}, {"epsilon", 0.9}, {"oversampling", 1}, {"gram_dtype", "f64"}};
    auto conv = instant(spec), lin = instant(spec);
    const Tensor w = testing::randn({O, C, 3, 3}, 1), b = testing::randn({O}, 2);
    const Tensor x = testing::randn(cg.x_shape, 3), g = testing::randn({N, O, Ho, Ho}, 4);
    calibrate(conv, [&] { run_conv(conv, x, w, b, g, a); });
    EXPECT_EQ(conv->report()["calibration"]["backward_calls"], 1);  // counted as calibration
    const Tensor X = conv_to_tokens(x, cg), G = g.reshape({N, O, L}).transpose(1, 2).contiguous();
    calibrate(lin, [&] { run_linear(lin, X, w.reshape({O, I}), b, G); });
    for (const auto& [cb, lb] : {std::pair{&conv->x_basis(), &lin->x_basis()}, std::pair{&conv->g_basis(), &lin->g_basis()}}) {
      ASSERT_EQ(cb->choice.rank, lb->choice.rank);
      ASSERT_EQ(cb->token_axis, lb->token_axis);
      EXPECT_TRUE(testing::all_close(matmul(cb->proj, cb->proj, true, false), matmul(lb->proj, lb->proj, true, false),
                                     1e-9, 1e-11));
    }
  }
}

// Dynamic padding (set_max_tokens): batches of L ≤ max_L tokens on the token axis give
// exactly what their zero-extensions to max_L give with fixed-length bases — the same Grams,
// bases and gradients (g_x on the batch's positions) — at a low rank too.
TEST(Instant, VariableLengthEqualsZeroExtension) {
  const int64_t B = 2, Lmax = 8, I = 6, O = 5;
  const nlohmann::json spec = {{"rank", 3}, {"axis", "token"}, {"exact_when_no_gain", false}};
  auto var = instant(spec), fixed = instant(spec);
  var->calibration()->set_max_tokens(Lmax);
  auto extend = [&](const Tensor& t) {  // (B, L, C) -> (B, Lmax, C) with zero rows
    Tensor z = Tensor::zeros({t.size(0), Lmax, t.size(2)}, t.dtype());
    z.slice(1, 0, t.size(1)).copy_(t);
    return z;
  };
  const Tensor w = testing::randn({O, I}, 1), b = testing::randn({O}, 2);
  const std::vector<int64_t> lengths = {5, 8, 3};
  calibrate(var, [&] {
    for (size_t i = 0; i < lengths.size(); ++i)
      run_linear(var, testing::randn({B, lengths[i], I}, 10 + i), w, b, testing::randn({B, lengths[i], O}, 20 + i));
  });
  calibrate(fixed, [&] {
    for (size_t i = 0; i < lengths.size(); ++i)
      run_linear(fixed, extend(testing::randn({B, lengths[i], I}, 10 + i)), w, b,
                 extend(testing::randn({B, lengths[i], O}, 20 + i)));
  });
  ASSERT_EQ(var->x_basis().n, Lmax);
  EXPECT_TRUE(testing::all_close(var->x_basis().proj, fixed->x_basis().proj, 1e-9, 1e-12));
  EXPECT_TRUE(testing::all_close(var->g_basis().proj, fixed->g_basis().proj, 1e-9, 1e-12));
  for (int64_t L : {4, 8}) {
    const Tensor x = testing::randn({B, L, I}, 30 + L), g = testing::randn({B, L, O}, 40 + L);
    ASSERT_TRUE(var->compresses({B, L, I, O}));
    const Grads a = run_linear(var, x, w, b, g), e = run_linear(fixed, extend(x), w, b, extend(g));
    EXPECT_TRUE(testing::all_close(a.gw, e.gw, 1e-9, 1e-12)) << "L " << L;
    EXPECT_TRUE(testing::all_close(a.gb, e.gb, 1e-9, 1e-12)) << "L " << L;
    EXPECT_TRUE(testing::all_close(a.gx, e.gx.slice(1, 0, L), 1e-9, 1e-12)) << "L " << L;
  }
  // Longer than the bases span: the exact backward for that call; fixed bases need one L.
  EXPECT_FALSE(var->compresses({B, Lmax + 1, I, O}));
  EXPECT_FALSE(fixed->compresses({B, 4, I, O}));
}

// Padding-free calls (CallContext::sequences): x (1, N, I) holding S sequences back to back gives
// what the padded (S, Lmax, I) batch with zero rows at the padding gives with fixed-length
// bases — the same Grams, bases and gradients on the kept rows — on either axis. Widths that
// exercise both the SIMD tiles and the scalar tails of the segment kernels.
// The generic low-rank kernels (tensor views + the GEMM table: what a GPU runs) drive the
// strategy to the CPU kernels' results: calibration, bases, saved projection and gradients,
// on both axes, padded and padding-free, in f64 and f32.
TEST(Instant, GenericKernelsGiveTheCpuKernelsResults) {
  struct GenericOnCpu {
    GenericOnCpu() { backend::set_generic_lowrank_on_cpu(true); }
    ~GenericOnCpu() { backend::set_generic_lowrank_on_cpu(false); }
  };
  auto offsets = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{0, 5, 13, 16, 17});
  const int64_t I = 37, O = 35;
  for (DType dt : {DType::F64, DType::F32})
    for (const char* axis : {"token", "channel"})
      for (bool packed : {false, true}) {
        const std::string what = std::string(dtype_name(dt)) + " " + axis + (packed ? " packed" : " padded");
        const double tol = dt == DType::F64 ? 1e-10 : 2e-4;
        const nlohmann::json spec = {{"axis", axis}, {"rank", 3}, {"gram_dtype", dt == DType::F64 ? "f64" : "f32"},
                                     {"exact_when_no_gain", false}};
        const Shape xs = packed ? Shape{1, 17, I} : Shape{3, 8, I}, gs = packed ? Shape{1, 17, O} : Shape{3, 8, O};
        const Tensor w = testing::randn({O, I}, 1).to(dt), b = testing::randn({O}, 2).to(dt);
        Grads got[2];
        Tensor proj[2];
        for (int generic = 0; generic < 2; ++generic) {
          std::unique_ptr<GenericOnCpu> guard = generic ? std::make_unique<GenericOnCpu>() : nullptr;
          auto s = instant(spec);
          s->calibration()->set_max_tokens(8);
          const CallContext call{packed ? offsets : nullptr, nullptr};
          calibrate(s, [&] {
            for (uint64_t i = 0; i < 2; ++i)
              run_linear(s, testing::randn(xs, 10 + i).to(dt), w, b, testing::randn(gs, 20 + i).to(dt), call);
          });
          got[generic] = run_linear(s, testing::randn(xs, 30).to(dt), w, b, testing::randn(gs, 31).to(dt), call);
          proj[generic] = matmul(s->x_basis().proj, s->x_basis().proj, true, false);  // sign-free
        }
        EXPECT_LT(testing::rel_error(proj[1], proj[0]), tol) << what << " x basis";
        EXPECT_LT(testing::rel_error(got[1].gx, got[0].gx), tol) << what << " g_x";
        EXPECT_LT(testing::rel_error(got[1].gw, got[0].gw), tol) << what << " g_w";
        EXPECT_LT(testing::rel_error(got[1].gb, got[0].gb), tol) << what << " g_b";
      }
}

TEST(Instant, PackedSequencesEqualZeroPaddedBatch) {
  const int64_t Lmax = 8, I = 37, O = 35;
  const std::vector<int64_t> lengths = {5, 8, 3, 1};
  const int64_t S = static_cast<int64_t>(lengths.size());
  auto offsets = std::make_shared<std::vector<int64_t>>(1, 0);
  for (int64_t l : lengths) offsets->push_back(offsets->back() + l);
  const int64_t N = offsets->back();
  auto padded = [&](int64_t C, uint64_t seed) {  // (S, Lmax, C), zero beyond each length
    Tensor t = testing::randn({S, Lmax, C}, seed);
    for (int64_t b = 0; b < S; ++b)
      if (lengths[b] < Lmax) t.slice(0, b, b + 1).slice(1, lengths[b], Lmax).fill_(0.0);
    return t;
  };
  auto pack = [&](const Tensor& t) {  // (S, Lmax, C) -> (1, N, C)
    std::vector<Tensor> rows;
    for (int64_t b = 0; b < S; ++b)
      rows.push_back(t.slice(0, b, b + 1).slice(1, 0, lengths[b]).reshape({lengths[b], t.size(2)}));
    return concat(rows, 0).reshape({1, N, t.size(2)});
  };
  const Tensor w = testing::randn({O, I}, 1), b = testing::randn({O}, 2);
  for (const char* axis : {"token", "channel"}) {
    const nlohmann::json spec = {{"rank", 3}, {"axis", axis}, {"gram_dtype", "f64"}, {"exact_when_no_gain", false}};
    auto var = instant(spec), fixed = instant(spec);
    var->calibration()->set_max_tokens(Lmax);
    auto packed_linear = [&](const Tensor& x, const Tensor& g) {
      return run_linear(var, pack(x), w, b, pack(g), CallContext{offsets, nullptr});
    };
    calibrate(var, [&] {
      for (uint64_t i = 0; i < 2; ++i) packed_linear(padded(I, 10 + i), padded(O, 20 + i));
    });
    calibrate(fixed, [&] {
      for (uint64_t i = 0; i < 2; ++i) run_linear(fixed, padded(I, 10 + i), w, b, padded(O, 20 + i));
    });
    EXPECT_TRUE(testing::all_close(var->x_basis().proj, fixed->x_basis().proj, 1e-9, 1e-12)) << axis;
    EXPECT_TRUE(testing::all_close(var->g_basis().proj, fixed->g_basis().proj, 1e-9, 1e-12)) << axis;
    const Tensor x = padded(I, 30), g = padded(O, 40);
    const Grads a = packed_linear(x, g), e = run_linear(fixed, x, w, b, g);
    const LayerGeometry& geom = var->record().measured.last_geom;
    EXPECT_EQ(geom.B, 1);
    EXPECT_EQ(geom.L, N);
    EXPECT_EQ(geom.sequences, S);
    EXPECT_EQ(geom.longest, Lmax);
    ASSERT_TRUE(var->compresses(geom)) << axis;
    EXPECT_TRUE(testing::all_close(a.gw, e.gw, 1e-9, 1e-12)) << axis;
    EXPECT_TRUE(testing::all_close(a.gb, e.gb, 1e-9, 1e-12)) << axis;
    EXPECT_TRUE(testing::all_close(a.gx, pack(e.gx), 1e-9, 1e-12)) << axis;
    // The paper figures count per sequence on the token axis: S sequences' projected rows.
    if (std::string(axis) == "token")
      EXPECT_DOUBLE_EQ(var->paper_saved_bytes_fp32(geom), 4.0 * 3 * S * I);
  }
  // The token axis of a packed call needs the span of the bases.
  auto unsized = instant({{"rank", 3}, {"axis", "token"}});
  try {
    calibrate(unsized, [&] {
      run_linear(unsized, pack(padded(I, 50)), w, b, pack(padded(O, 51)), CallContext{offsets, nullptr});
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs the longest sequence the bases must span"), std::string::npos)
        << e.what();
  }
}

// Layers that read one x (BERT's query, key, value) calibrate on the same inputs, so their x
// bases are bit-identical: given the input as shared (CallContext::shared, as SelfAttention
// passes it), x̂ is computed and kept once (the tape counts it once, as vanilla keeps their
// shared x once), with the gradients of separate copies. Packed calls too.
TEST(Instant, LayersReadingOneInputKeepOneProjection) {
  const int64_t B = 2, L = 8, I = 6, O = 5, R = 3;
  for (bool packed : {false, true}) {
    auto offsets = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{0, 5, 8, 16});
    std::vector<std::shared_ptr<Instant>> layers;
    for (int i = 0; i < 3; ++i) {
      layers.push_back(instant({{"rank", R}, {"axis", "token"}, {"gram_dtype", "f64"}, {"exact_when_no_gain", false}}));
      layers.back()->calibration()->set_max_tokens(L);
    }
    std::vector<Tensor> w, b, g;
    for (uint64_t i = 0; i < 3; ++i) {
      w.push_back(testing::randn({O, I}, 1 + i));
      b.push_back(testing::randn({O}, 4 + i));
    }
    const Shape xs = packed ? Shape{1, 16, I} : Shape{B, L, I}, gs = packed ? Shape{1, 16, O} : Shape{B, L, O};
    const SequenceOffsets sequences = packed ? offsets : nullptr;
    for (auto& l : layers) l->begin_calibration();
    for (uint64_t k = 0; k < 2; ++k) {
      const Tensor x = testing::randn(xs, 10 + k);
      for (uint64_t i = 0; i < 3; ++i)
        run_linear(layers[i], x, w[i], b[i], testing::randn(gs, 20 + 3 * k + i), CallContext{sequences, nullptr});
    }
    for (auto& l : layers) l->finish_calibration();
    ASSERT_TRUE(testing::all_close(layers[0]->x_basis().proj, layers[2]->x_basis().proj, 0, 0));
    // One forward through all three layers: on one x (shared) or on three copies of it.
    auto forward = [&](bool shared, int64_t& saved) {
      const Tensor x0 = testing::randn(xs, 30);
      std::vector<Tensor> xi, wi;
      Tensor loss;
      {
        const CallContext call{sequences, shared ? std::make_shared<SharedInput>() : nullptr};
        for (int i = 0; i < 3; ++i) {
          xi.push_back(shared && i > 0 ? xi[0] : x0.clone());
          if (!shared || i == 0) xi.back().set_requires_grad();
          wi.push_back(w[i].clone());
          wi.back().set_requires_grad();
          const Tensor y = strategy_linear(xi.back(), wi.back(), b[i], layers[i], call);
          const Tensor term = sum(mul(y, testing::randn(gs, 40 + i)));
          loss = loss.defined() ? add(loss, term) : term;
        }
      }
      saved = autograd::saved_bytes();
      loss.backward();
      Tensor gx = xi[0].grad();
      if (!shared) gx = add(add(gx, xi[1].grad()), xi[2].grad());
      return std::vector<Tensor>{gx, wi[0].grad(), wi[1].grad(), wi[2].grad()};
    };
    int64_t saved_shared = 0, saved_copies = 0;
    const auto a = forward(true, saved_shared), e = forward(false, saved_copies);
    const int64_t samples = packed ? 3 : B;
    EXPECT_EQ(saved_copies - saved_shared, 2 * R * samples * I * 8) << "packed " << packed;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(testing::all_close(a[i], e[i], 1e-12, 1e-12)) << i;
  }
}

// SelfAttention owns the sharing: its query, key and value calls get one SharedInput, so the
// three equal bases keep one x̂, two fewer than three unshared calls on the same x keep.
TEST(Instant, SelfAttentionKeepsOneProjectionForQueryKeyValue) {
  const int64_t B = 2, T = 8, H = 6, R = 3;
  SelfAttention attn(H, 2);
  const Policy policy = Policy::from_json(
      {{"default", {{"type", "instant"}, {"rank", R}, {"axis", "token"}, {"gram_dtype", "f64"},
                    {"exact_when_no_gain", false}}}},
      "test");
  const auto strategies = policy.apply(attn);
  ASSERT_EQ(strategies.size(), 3u);
  auto* q = dynamic_cast<Linear*>(attn.named_modules()[1].second);
  auto* k = dynamic_cast<Linear*>(attn.named_modules()[2].second);
  auto* v = dynamic_cast<Linear*>(attn.named_modules()[3].second);
  ASSERT_TRUE(q && k && v);
  for (const auto& s : strategies) s->begin_calibration();
  for (uint64_t i = 0; i < 2; ++i) sum(attn.forward(testing::randn({B, T, H}, 10 + i, DType::F32))).backward();
  for (const auto& s : strategies) s->finish_calibration();
  const Tensor x = testing::randn({B, T, H}, 20, DType::F32);
  int64_t shared = 0, unshared = 0;
  {
    const Tensor y = attn.forward(x);
    shared = autograd::saved_bytes();
  }
  {
    const Tensor y = scaled_dot_product_attention(q->forward(x), k->forward(x), v->forward(x), 2, Tensor(), 0.0, true);
    unshared = autograd::saved_bytes();
  }
  for (const auto& s : strategies) ASSERT_TRUE(dynamic_cast<Instant&>(*s).compresses(s->record().measured.last_geom));
  EXPECT_EQ(unshared - shared, 2 * R * B * H * 4);  // two x̂ (R, B, H) in f32
}

}  // namespace
}  // namespace lb::nn::backward
