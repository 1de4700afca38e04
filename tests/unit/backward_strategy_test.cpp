// Backward strategies: the vanilla strategy through the strategy path equals the plain op,
// the factory and policy validate configs with path-named errors, the policy assigns by rule,
// override and frozen state, and saved bytes are what the strategy keeps.
#include <gtest/gtest.h>

#include "lb/autograd/node.h"
#include "lb/core/allocator.h"
#include "lb/core/precision.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/policy.h"
#include "lb/nn/backward/probe.h"
#include "lb/nn/layers.h"
#include "src/backend/conv_tokens.h"
#include "testing/testing.h"

namespace lb::nn::backward {
namespace {

std::shared_ptr<Strategy> vanilla() { return make_strategy({{"type", "vanilla"}}, "test"); }

TEST(Strategy, VanillaPathGradcheck) {
  const Tensor x = testing::randn({2, 3, 4}, 1), w = testing::randn({5, 4}, 2), b = testing::randn({5}, 3);
  auto s = vanilla();
  EXPECT_TRUE(testing::gradcheck(
      [s](const std::vector<Tensor>& in) { return strategy_linear(in[0], in[1], in[2], s); }, {x, w, b}));
  EXPECT_TRUE(testing::gradcheck(  // 2-D input: B = N, L = 1
      [s](const std::vector<Tensor>& in) { return strategy_linear(in[0], in[1], Tensor(), s); },
      {testing::randn({6, 4}, 4), w}));
}

TEST(Strategy, SavedBytesAndFrozenWeights) {
  ASSERT_EQ(autograd::saved_bytes(), 0);
  Tensor x = testing::randn({2, 8, 16}, 5, DType::F32);
  x.set_requires_grad();
  Tensor w = testing::randn({32, 16}, 6, DType::F32);
  w.storage()->set_tag(MemTag::Parameter);
  w.set_requires_grad();
  auto s = vanilla();
  Tensor y = strategy_linear(x, w, Tensor(), s);
  EXPECT_EQ(autograd::saved_bytes(), 2 * 8 * 16 * 4);  // x only; w is a parameter
  sum(y).backward();
  EXPECT_EQ(autograd::saved_bytes(), 0);
  EXPECT_EQ(s->report()["measured"]["backward_calls"], 1);
  // Frozen weight: no g_w, so x is not kept.
  w.set_requires_grad(false);
  Tensor y2 = strategy_linear(x, w, Tensor(), s);
  EXPECT_EQ(autograd::saved_bytes(), 0);
  sum(y2).backward();
}

TEST(Strategy, FrozenWeightComputesItsProductOnce) {
  // LoRA's frozen base layers take the plain op; the product is made once, not once more to be
  // dropped (it was, and that was a third of a MiniLM LoRA step). Activation bytes the call
  // adds at its peak: one output.
  Tensor x = testing::randn({4, 64, 96}, 7, DType::F32);
  x.set_requires_grad();
  Tensor w = testing::randn({128, 96}, 8, DType::F32);
  w.storage()->set_tag(MemTag::Parameter);
  const auto s = vanilla();
  Allocator& a = cpu_allocator();
  a.reset_activation_peak();
  const int64_t before = a.stats().activation_current;
  const Tensor y = strategy_linear(x, w, Tensor(), s);
  const int64_t rise = a.stats().activation_peak - before, y_bytes = 4 * 64 * 128 * 4;
  EXPECT_GE(rise, y_bytes);
  EXPECT_LT(rise, 2 * y_bytes);
  EXPECT_TRUE(y.requires_grad());  // recorded: g_x flows to x
}

TEST(Strategy, PaperMetricsMatchReference) {
  // One BERT-base layer at L = 512 (docs/algorithms.md): vanilla 14495.5 MFLOPs and 13.5 MiB.
  auto s = vanilla();
  const std::vector<LayerGeometry> layer = {{1, 512, 768, 768}, {1, 512, 768, 768}, {1, 512, 768, 768},
                                            {1, 512, 768, 768}, {1, 512, 768, 3072}, {1, 512, 3072, 768}};
  double flops = 0, bytes = 0;
  for (const auto& g : layer) {
    flops += s->paper_backward_flops(g);
    bytes += s->paper_saved_bytes_fp32(g);
  }
  EXPECT_NEAR(flops / 1e6, 14495.5, 0.05);
  EXPECT_NEAR(bytes / (1024.0 * 1024.0), 13.5, 1e-9);
}

TEST(Factory, ErrorsNamePathAndChoices) {
  auto expect_msg = [](const nlohmann::json& j, const std::string& needle) {
    try {
      make_strategy(j, "model.backward.rules[1]");
      ADD_FAILURE() << "no error for " << j.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_msg({{"type", "fancy"}}, "model.backward.rules[1].type");
  expect_msg({{"type", "fancy"}}, "vanilla");
  expect_msg({{"type", "vanilla"}, {"rank", 3}}, "unknown key 'rank'");
  expect_msg(nlohmann::json::object(), "missing \"type\"");
  EXPECT_EQ(make_strategy({{"type", "vanilla"}}, "x")->hyperparams()["type"], "vanilla");
}

class TwoLayer : public Module {
 public:
  TwoLayer() {
    auto enc = register_module("encoder", std::make_shared<Container>("Encoder"));
    fc1 = enc->add("fc1", std::make_shared<Linear>(4, 4));
    fc2 = enc->add("fc2", std::make_shared<Linear>(4, 4));
    classifier = register_module("classifier", std::make_shared<Linear>(4, 2));
  }
  std::string type_name() const override { return "TwoLayer"; }
  std::shared_ptr<Linear> fc1, fc2, classifier;
};

TEST(Policy, RulesOverrideAndFrozen) {
  TwoLayer m;
  const auto p = Policy::from_json({{"default", {{"type", "vanilla"}}},
                                    {"rules", {{{"match", "encoder.fc2"}, {"type", "vanilla"}}}}},
                                   "backward");
  auto strategies = p.apply(m);
  ASSERT_EQ(strategies.size(), 3u);
  EXPECT_EQ(strategies[0]->record().name, "encoder.fc1");
  EXPECT_EQ(strategies[2]->record().id, 2);
  EXPECT_TRUE(p.compressible("encoder.fc1"));
  EXPECT_FALSE(p.compressible("classifier"));
  m.freeze("encoder.fc1.*");
  p.apply(m, "vanilla");
  EXPECT_EQ(m.fc1->backward_strategy()->type(), "vanilla");
  EXPECT_THROW(p.apply(m, "nonsense"), Error);
  EXPECT_THROW(Policy::from_json({{"rules", {{{"type", "vanilla"}}}}}, "backward"), Error);
  EXPECT_THROW(Policy::from_json({{"defaults", nlohmann::json::object()}}, "backward"), Error);
  EXPECT_THROW(Policy::from_json({{"exclude", "classifier"}}, "backward"), Error);
}

}  // namespace
}  // namespace lb::nn::backward

namespace lb::nn::backward {
namespace {

TEST(Strategy, ConvThroughVanillaGradcheck) {
  std::shared_ptr<Strategy> s = make_strategy({{"type", "vanilla"}}, "test");
  for (const auto& [k, stride, pad] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 0}, {3, 1, 1}, {3, 2, 1}, {2, 1, 0}}) {
    Conv2dArgs a;
    a.stride = {stride, stride};
    a.padding = {pad, pad};
    const Tensor x = testing::randn({2, 3, 5, 5}, 10 + k), w = testing::randn({4, 3, k, k}, 20 + k),
                 b = testing::randn({4}, 30);
    EXPECT_TRUE(testing::gradcheck(
        [s, a](const std::vector<Tensor>& in) { return strategy_conv2d(in[0], in[1], in[2], a, s); },
        {x, w, b}))
        << "k " << k << " stride " << stride << " pad " << pad;
  }
}

TEST(Strategy, ConvThroughVanillaKeepsTheImageAndMatchesTheOp) {
  // Vanilla keeps x itself (not its 9x larger im2col tokens) and runs the op's backward,
  // Winograd (16 -> 16 channels, 3x3 stride 1) and im2col (stride 2) alike.
  for (const int64_t stride : {1, 2}) {
    Conv2dArgs a;
    a.stride = {stride, stride};
    a.padding = {1, 1};
    Tensor x = testing::randn({2, 16, 8, 8}, 50, DType::F32), w = testing::randn({16, 16, 3, 3}, 51, DType::F32);
    Tensor b = testing::randn({16}, 52, DType::F32), gy_seed = testing::randn({2, 16, 8 / stride, 8 / stride}, 53, DType::F32);
    std::vector<Tensor> grads[2];
    for (int path = 0; path < 2; ++path) {
      Tensor xi = x.clone(), wi = w.clone(), bi = b.clone();
      for (Tensor* t : {&xi, &wi, &bi}) t->set_requires_grad();
      std::shared_ptr<Strategy> s = make_strategy({{"type", "vanilla"}}, "test");
      const Tensor y = path == 0 ? conv2d(xi, wi, bi, a) : strategy_conv2d(xi, wi, bi, a, s);
      if (path == 1)  // x and w (w is a plain tensor here, not a Parameter-tagged one)
        EXPECT_EQ(autograd::saved_bytes(), static_cast<int64_t>(x.nbytes() + w.nbytes()));
      sum(mul(y, gy_seed)).backward();
      grads[path] = {xi.grad(), wi.grad(), bi.grad()};
      if (path == 1) EXPECT_EQ(s->report()["measured"]["backward_calls"], 1) << s->report().dump();
    }
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(testing::all_close(grads[1][i], grads[0][i], 1e-6, 1e-6)) << "stride " << stride << " grad " << i;
  }
}

TEST(Strategy, ConvTokensRoundTrip) {
  // conv_from_tokens is the adjoint of conv_to_tokens: <T(x), t> = <x, T*(t)>.
  ConvGeometry cg;
  cg.x_shape = {2, 3, 6, 6};
  cg.kH = cg.kW = 3;
  cg.args.padding = {1, 1};
  cg.args.stride = {2, 2};
  cg.Ho = cg.Wo = 3;
  const Tensor x = testing::randn(cg.x_shape, 40), t = testing::randn({2, 9, 27}, 41);
  const double lhs = sum(mul(conv_to_tokens(x, cg), t)).item<double>();
  const double rhs = sum(mul(x, conv_from_tokens(t, cg))).item<double>();
  EXPECT_NEAR(lhs, rhs, 1e-10 * std::abs(lhs));
}


// The generic token view (index-map gather and scatter-add: what a GPU runs) equals the CPU
// loops, for plain, strided, padded, dilated, 1×1 strided and pointwise convolutions.
TEST(Strategy, GenericConvTokensMatchTheCpuLoops) {
  struct Case {
    int64_t C, H, k, stride, pad, dil;
  };
  for (const Case& c : {Case{3, 7, 3, 1, 1, 1}, Case{3, 8, 3, 2, 1, 1}, Case{2, 9, 3, 1, 2, 2}, Case{4, 6, 1, 2, 0, 1},
                        Case{4, 5, 1, 1, 0, 1}}) {
    ConvGeometry cg;
    cg.x_shape = {2, c.C, c.H, c.H};
    cg.kH = cg.kW = c.k;
    cg.args.padding = {c.pad, c.pad};
    cg.args.stride = {c.stride, c.stride};
    cg.args.dilation = {c.dil, c.dil};
    cg.Ho = cg.Wo = (c.H + 2 * c.pad - c.dil * (c.k - 1) - 1) / c.stride + 1;
    const int64_t L = cg.Ho * cg.Wo, I = c.C * c.k * c.k;
    const std::string what = "C " + std::to_string(c.C) + " k " + std::to_string(c.k) + " stride " +
                             std::to_string(c.stride) + " pad " + std::to_string(c.pad) + " dil " + std::to_string(c.dil);
    const Tensor x = testing::randn(cg.x_shape, 50), t = testing::randn({2, L, I}, 51);
    const Tensor want_t = conv_to_tokens(x, cg), want_x = conv_from_tokens(t, cg);
    const Tensor want_tr = backend::kCpuConvTokens.transpose_last2(t);
    backend::set_generic_conv_tokens_on_cpu(true);
    const Tensor got_t = conv_to_tokens(x, cg), got_x = conv_from_tokens(t, cg);
    const Tensor got_tr = backend::conv_token_kernels(Device::cpu()).transpose_last2(t);
    backend::set_generic_conv_tokens_on_cpu(false);
    EXPECT_EQ(got_t.to_double_vector(), want_t.to_double_vector()) << what << " tokens";
    EXPECT_LT(testing::rel_error(got_x, want_x), 1e-14) << what << " adjoint";
    EXPECT_EQ(got_tr.to_double_vector(), want_tr.to_double_vector()) << what << " transpose";
  }
}

// On a GPU every strategy runs a convolution through the token view (Strategy::save_conv); on
// the CPU, with that route forced: INSTANT's gradients equal its image-layout path's, and
// HOT's equal HOT's Linear path on the tokens (same draws), bit for bit.
TEST(Strategy, ConvTokenViewRouteMatchesTheImagePaths) {
  Conv2dArgs a;
  a.padding = {1, 1};
  struct Route {
    Route() {
      set_conv_token_view_on_cpu(true);
      backend::set_generic_conv_tokens_on_cpu(true);
    }
    ~Route() {
      set_conv_token_view_on_cpu(false);
      backend::set_generic_conv_tokens_on_cpu(false);
    }
  };
  auto run = [&](const std::shared_ptr<Strategy>& s, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
    Tensor xi = x.clone(), wi = w.clone(), bi = b.clone();
    xi.set_requires_grad();
    wi.set_requires_grad();
    bi.set_requires_grad();
    strategy_conv2d(xi, wi, bi, a, s).backward(g);
    return std::vector<Tensor>{xi.grad(), wi.grad(), bi.grad()};
  };
  {  // INSTANT, f64 Grams, fixed rank, calibrated on two batches then one training step
    const Tensor w = testing::randn({6, 4, 3, 3}, 1), b = testing::randn({6}, 2);
    std::vector<Tensor> got[2];
    for (int token_view = 0; token_view < 2; ++token_view) {
      std::unique_ptr<Route> route = token_view ? std::make_unique<Route>() : nullptr;
      std::shared_ptr<Strategy> s = make_strategy(
          {{"type", "instant"}, {"rank", 3}, {"gram_dtype", "f64"}, {"exact_when_no_gain", false}}, "test");
      s->begin_calibration();
      for (uint64_t i = 0; i < 2; ++i) run(s, testing::randn({3, 4, 6, 6}, 10 + i), w, b, testing::randn({3, 6, 6, 6}, 20 + i));
      s->finish_calibration();
      got[token_view] = run(s, testing::randn({3, 4, 6, 6}, 30), w, b, testing::randn({3, 6, 6, 6}, 31));
    }
    for (int i = 0; i < 3; ++i) EXPECT_LT(testing::rel_error(got[1][i], got[0][i]), 1e-8) << "instant grad " << i;
  }
  {  // HOT (f32): the token route is HOT's Linear path on conv_to_tokens(x)
    const Tensor x = testing::randn({3, 4, 8, 8}, 3).to(DType::F32), w = testing::randn({6, 4, 3, 3}, 4).to(DType::F32);
    const Tensor b = testing::randn({6}, 5).to(DType::F32), g = testing::randn({3, 6, 8, 8}, 6).to(DType::F32);
    ConvGeometry cg;
    cg.x_shape = x.shape();
    cg.kH = cg.kW = 3;
    cg.args = a;
    cg.Ho = cg.Wo = 8;
    const auto step = std::make_shared<const StepContext>(StepContext{7, 1, kTrainingStream});
    std::shared_ptr<Strategy> conv = make_strategy({{"type", "hot"}, {"lqs", false}}, "test");
    std::shared_ptr<Strategy> lin = make_strategy({{"type", "hot"}, {"lqs", false}}, "test");
    conv->record().step_context = step;
    lin->record().step_context = step;
    std::vector<Tensor> via_conv;
    {
      Route route;
      via_conv = run(conv, x, w, b, g);
    }
    Tensor tokens = conv_to_tokens(x, cg), w2d = w.reshape({6, 36}).clone();
    tokens.set_requires_grad();
    w2d.set_requires_grad();
    strategy_linear(tokens, w2d, Tensor(), lin).backward(g.reshape({3, 6, 64}).transpose(1, 2).contiguous());
    EXPECT_EQ(via_conv[1].reshape({6, 36}).to_double_vector(), w2d.grad().to_double_vector()) << "hot g_w";
    backend::set_generic_conv_tokens_on_cpu(true);  // the route's col2im (its summation order)
    const Tensor gx = conv_from_tokens(tokens.grad(), cg);
    backend::set_generic_conv_tokens_on_cpu(false);
    EXPECT_EQ(via_conv[0].to_double_vector(), gx.to_double_vector()) << "hot g_x";
  }
}

// Exact lean: a Linear after GELU keeps GELU's kept input, not GELU's output, and recomputes
// the output in backward: the same gradients bit for bit, one (B, L, 4h)-sized tensor fewer.
// Under bf16 products GELU keeps a rounded copy, which cannot give the output back exactly:
// there the Linear keeps its input as before.
TEST(Strategy, LinearAfterGeluKeepsNoCopyOfItsInput) {
  const int64_t B = 2, L = 5, I = 6, H = 16, O = 3;
  const Tensor x = testing::randn({B, L, I}, 70, DType::F32), w1 = testing::randn({H, I}, 71, DType::F32);
  const Tensor w2 = testing::randn({O, H}, 72, DType::F32), b2 = testing::randn({O}, 73, DType::F32);
  const Tensor g = testing::randn({B, L, O}, 74, DType::F32);
  for (const bool bf16 : {false, true}) {
    const MatmulPrecisionScope precision(bf16 ? MatmulPrecision::BF16 : MatmulPrecision::F32);
    std::vector<Tensor> grads[2];
    int64_t kept[2] = {0, 0};
    for (int lean = 0; lean < 2; ++lean) {
      Tensor xi = x.clone(), w1i = w1.clone(), w2i = w2.clone(), b2i = b2.clone();
      for (Tensor* t : {&xi, &w1i, &w2i, &b2i}) t->set_requires_grad();
      const Tensor h = gelu(linear(xi, w1i, Tensor()));
      // Not lean: a copy of GELU's output (an op without a recipe), which the Linear keeps.
      const Tensor a = lean ? h : h.clone();
      const Tensor y = strategy_linear(a, w2i, b2i, make_strategy({{"type", "vanilla"}}, "test"));
      kept[lean] = autograd::saved_bytes();
      y.backward(g);
      grads[lean] = {xi.grad(), w1i.grad(), w2i.grad(), b2i.grad()};
    }
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(grads[1][i].to_double_vector(), grads[0][i].to_double_vector()) << "grad " << i << " bf16 " << bf16;
    if (bf16) EXPECT_EQ(kept[0] - kept[1], 0) << "a rounded GELU input cannot give a back exactly";
    else EXPECT_EQ(kept[0] - kept[1], B * L * H * 4) << "one f32 (B, L, H) tensor fewer";
  }
}

// Exact lean: a Linear after LayerNorm keeps LayerNorm's kept input (with its weight and
// bias, parameters) instead of the normalised output, and recomputes the output in backward
// with the same kernel: the same gradients bit for bit, one (B, L, H)-sized tensor fewer.
// The three projections of one attention input all do (none keeps a copy); so does the plain
// linear op.
TEST(Strategy, LinearAfterLayerNormKeepsNoCopyOfItsInput) {
  const int64_t B = 2, L = 5, H = 8, O = 3;
  const Tensor x = testing::randn({B, L, H}, 80, DType::F32), gamma = testing::randn({H}, 81, DType::F32);
  const Tensor beta = testing::randn({H}, 82, DType::F32), w = testing::randn({O, H}, 83, DType::F32);
  const Tensor g = testing::randn({B, L, O}, 84, DType::F32);
  for (const int consumers : {1, 3, -1}) {  // -1: one plain linear
    std::vector<Tensor> grads[2];
    int64_t kept[2] = {0, 0};
    for (int lean = 0; lean < 2; ++lean) {
      Tensor xi = x.clone(), gi = gamma.clone(), bi = beta.clone(), wi = w.clone();
      for (Tensor* t : {&xi, &gi, &bi, &wi}) t->set_requires_grad();
      const Tensor n = layer_norm(mul_scalar(xi, 2.0), gi, bi, 1e-5);
      const Tensor a = lean ? n : n.clone();  // not lean: a copy without a recipe
      Tensor y;
      if (consumers < 0) y = linear(a, wi, Tensor());
      for (int c = 0; c < consumers; ++c) {
        const Tensor yc = strategy_linear(a, wi, Tensor(), make_strategy({{"type", "vanilla"}}, "test"));
        y = c == 0 ? yc : add(y, yc);
      }
      kept[lean] = autograd::saved_bytes();
      y.backward(g);
      grads[lean] = {xi.grad(), gi.grad(), bi.grad(), wi.grad()};
    }
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(grads[1][i].to_double_vector(), grads[0][i].to_double_vector()) << "grad " << i;
    EXPECT_EQ(kept[0] - kept[1], B * L * H * 4) << consumers << " consumer(s): one f32 (B, L, H) tensor fewer";
  }
}

// Exact lean: the Linear after attention (the output projection) keeps attention's kept
// q, k, v, mask, row stats and keep bits instead of the context, and recomputes the context
// in backward with the same kernel and Philox position: the same gradients bit for bit
// (dropout on, so the keep bits must match too), one (B, T, H)-sized tensor fewer.
TEST(Strategy, LinearAfterAttentionKeepsNoCopyOfItsInput) {
  const int64_t B = 2, T = 6, heads = 2, H = 8, O = 3;
  const Tensor q = testing::randn({B, T, H}, 90, DType::F32), k = testing::randn({B, T, H}, 91, DType::F32);
  const Tensor v = testing::randn({B, T, H}, 92, DType::F32), w = testing::randn({O, H}, 93, DType::F32);
  const Tensor mask = testing::randn({B, 1, 1, T}, 94, DType::F32), g = testing::randn({B, T, O}, 95, DType::F32);
  std::vector<Tensor> grads[2];
  int64_t kept[2] = {0, 0};
  for (int lean = 0; lean < 2; ++lean) {
    Tensor qi = q.clone(), ki = k.clone(), vi = v.clone(), wi = w.clone();
    for (Tensor* t : {&qi, &ki, &vi, &wi}) t->set_requires_grad();
    PhiloxStream rng(7);
    const Tensor ctx = attention(qi, ki, vi, heads, mask, 0.25, true, rng);
    const Tensor a = lean ? ctx : ctx.clone();  // not lean: a copy without a recipe
    const Tensor y = strategy_linear(a, wi, Tensor(), make_strategy({{"type", "vanilla"}}, "test"));
    kept[lean] = autograd::saved_bytes();
    y.backward(g);
    grads[lean] = {qi.grad(), ki.grad(), vi.grad(), wi.grad()};
  }
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(grads[1][i].to_double_vector(), grads[0][i].to_double_vector()) << "grad " << i;
  EXPECT_EQ(kept[0] - kept[1], B * T * H * 4) << "one f32 (B, T, H) tensor fewer";
}

// Deferred save: a compressed strategy (HOT with its int8 and stochastic rounding, INSTANT at
// a low rank) whose input LayerNorm can give back keeps nothing of its own and computes its
// state in backward from the recomputed input: the same gradients bit for bit as keeping the
// state from forward (the input passed through a copy without a recipe), and only the
// producer's bytes on the tape. Three consumers of one input, as BERT's q, k and v.
TEST(Strategy, CompressedLinearAfterLayerNormKeepsNothingOfItsOwn) {
  const int64_t B = 2, L = 16, H = 32, O = 24;
  const Tensor x = testing::randn({B, L, H}, 60, DType::F32), gamma = testing::randn({H}, 61, DType::F32);
  const Tensor beta = testing::randn({H}, 62, DType::F32), g = testing::randn({B, L, O}, 64, DType::F32);
  const nlohmann::json specs[] = {{{"type", "hot"}},
                                  {{"type", "instant"}, {"rank", 4}, {"exact_when_no_gain", false}}};
  for (const auto& spec : specs) {
    std::vector<Tensor> grads[2];
    int64_t kept[2] = {0, 0};
    for (int lean = 0; lean < 2; ++lean) {
      Tensor xi = x.clone(), gi = gamma.clone(), bi = beta.clone();
      for (Tensor* t : {&xi, &gi, &bi}) t->set_requires_grad();
      gi.storage()->set_tag(MemTag::Parameter);
      bi.storage()->set_tag(MemTag::Parameter);
      std::vector<Tensor> w;
      std::vector<std::shared_ptr<Strategy>> layers;
      for (uint64_t c = 0; c < 3; ++c) {
        w.push_back(testing::randn({O, H}, 65 + c, DType::F32).set_requires_grad());
        w.back().storage()->set_tag(MemTag::Parameter);
        layers.push_back(make_strategy(spec, "test"));
        layers.back()->set_layer("layer" + std::to_string(c), static_cast<int64_t>(c));
      }
      if (spec["type"] == "instant") {  // bases from one exact pass
        for (auto& l : layers) l->begin_calibration();
        const Tensor n = layer_norm(x, gamma, beta, 1e-5);
        for (uint64_t c = 0; c < 3; ++c)
          strategy_linear(n, w[c], Tensor(), layers[c]).backward(testing::randn({B, L, O}, 70 + c, DType::F32));
        for (auto& l : layers) l->finish_calibration();
        for (auto& t : w) t.zero_grad();
      }
      const int64_t before = autograd::saved_bytes();
      const Tensor n = layer_norm(mul_scalar(xi, 2.0), gi, bi, 1e-5);
      const Tensor a = lean ? n : n.clone();  // not lean: a copy without a recipe
      Tensor y;
      for (int c = 0; c < 3; ++c) {
        const Tensor yc = strategy_linear(a, w[c], Tensor(), layers[c]);
        y = c == 0 ? yc : add(y, yc);
      }
      kept[lean] = autograd::saved_bytes() - before;
      if (lean) EXPECT_EQ(layers[0]->record().measured.last_saved_bytes, 0) << spec.dump();
      y.backward(g);
      grads[lean] = {xi.grad(), gi.grad(), bi.grad(), w[0].grad(), w[1].grad(), w[2].grad()};
    }
    for (size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_EQ(grads[1][i].to_double_vector(), grads[0][i].to_double_vector()) << spec.dump() << " grad " << i;
    // Lean: LayerNorm's input (B·L·H f32) and statistics only. Not lean: also the strategies'
    // states (HOT: three int8 HLA copies, INSTANT: one shared projection) and the copy.
    EXPECT_EQ(kept[1], B * L * H * 4 + 2 * B * L * 4) << spec.dump();
    EXPECT_GT(kept[0], kept[1]) << spec.dump();
  }
}

// The gradient-fidelity probe: a ProbedStrategy passes on the exact gradients (equal to the
// plain op's) and records the wrapped strategy's own against them, for Linear and Conv2d; the
// wrapped strategy draws from the probe stream meanwhile and gets its context and figures back.
TEST(Strategy, ProbePassesExactGradientsAndRecordsTheStrategys) {
  for (const bool conv : {false, true}) {
    Conv2dArgs a;
    a.padding = {1, 1};
    const Tensor x = conv ? testing::randn({2, 16, 8, 8}, 60, DType::F32) : testing::randn({2, 32, 16}, 60, DType::F32);
    const Tensor w = conv ? testing::randn({16, 16, 3, 3}, 61, DType::F32) : testing::randn({24, 16}, 61, DType::F32);
    std::vector<Tensor> grads[2];
    std::shared_ptr<Strategy> hot = make_strategy({{"type", "hot"}}, "test");
    const auto step = std::make_shared<const StepContext>(StepContext{3, 5, kTrainingStream});
    hot->record().step_context = step;
    auto probe = std::make_shared<ProbedStrategy>(hot);
    EXPECT_EQ(hot->record().step().stream, kProbeStream);
    EXPECT_EQ(hot->record().step().step, 5);
    for (int path = 0; path < 2; ++path) {
      Tensor xi = x.clone(), wi = w.clone();
      xi.set_requires_grad();
      wi.set_requires_grad();
      const Tensor y = path == 0 ? (conv ? conv2d(xi, wi, Tensor(), a) : linear(xi, wi, Tensor()))
                                 : (conv ? strategy_conv2d(xi, wi, Tensor(), a, probe) : strategy_linear(xi, wi, Tensor(), probe));
      sum(mul(y, testing::randn(y.shape(), 62, DType::F32))).backward();
      grads[path] = {xi.grad(), wi.grad()};
    }
    probe->end();
    EXPECT_EQ(hot->record().step_context, step);
    for (int i = 0; i < 2; ++i)
      EXPECT_TRUE(testing::all_close(grads[1][i], grads[0][i], 1e-5, 1e-5)) << (conv ? "conv" : "linear") << " grad " << i;
    const auto& st = probe->stats();
    EXPECT_EQ(st.calls, 1);
    // HOT's INT4 g_x and low-rank g_w are close to, but not, the exact gradients.
    for (const auto& [dot, ee, aa, dd] : {std::tuple{st.gw_dot, st.gw_ee, st.gw_aa, st.gw_dd},
                                          std::tuple{st.gx_dot, st.gx_ee, st.gx_aa, st.gx_dd}}) {
      const double cos = dot / std::sqrt(ee * aa);
      EXPECT_GT(cos, 0.3) << (conv ? "conv" : "linear");
      EXPECT_LT(cos, 0.99999) << (conv ? "conv" : "linear");
      EXPECT_GT(dd, 0);
    }
    EXPECT_EQ(hot->report()["measured"]["backward_calls"], 0);  // probe calls are not training's
  }
}

}  // namespace
}  // namespace lb::nn::backward
