// LoRA (lb/nn/lora.h): the adapted Linear's output and gradients (f64 finite differences),
// merge equals unmerged, PEFT's target matching, the config section and its errors, and
// training on a small BERT: only the adapters and the head train, the frozen base gets no
// gradient and no optimizer state, and the checkpoint carries the adapters.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "lb/core/error.h"
#include "lb/core/random.h"
#include "lb/nn/layers.h"
#include "lb/nn/lora.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/instant.h"
#include "lb/autograd/node.h"
#include "lb/ops.h"
#include "lb/train/config.h"
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"
#include "src/train/training_setup.h"
#include "lb/train/trainer.h"
#include "lb/optim/optimizer.h"
#include "models/bert.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::nn {
namespace {

using lb::testing::all_close;
using lb::testing::randn;

// A Linear 6 -> 5 with an r = 3 adapter (alpha 6: scale 2), B made non-zero, all in f64.
std::unique_ptr<Linear> adapted(uint64_t seed) {
  auto lin = std::make_unique<Linear>(6, 5);
  lin->add_lora({3, 6.0, 0.0});
  lin->to(DType::F64);
  lin->lora_B().weight().copy_(randn({5, 3}, seed));
  return lin;
}

TEST(Lora, AddsScaledLowRankTermAndFreezesTheWeight) {
  const auto adapted_ref = adapted(3);
  Linear lin(6, 5);
  const Tensor x = randn({2, 4, 6}, 1).to(DType::F32);
  const Tensor before = lin.forward(x);
  lin.add_lora({3, 6.0, 0.0});
  EXPECT_FALSE(lin.weight().requires_grad());
  EXPECT_TRUE(lin.bias().requires_grad());  // lora.bias decides, not the adapter
  EXPECT_TRUE(lin.lora_A().weight().requires_grad());
  EXPECT_EQ(lin.lora_A().weight().shape(), (Shape{3, 6}));
  EXPECT_EQ(lin.lora_B().weight().shape(), (Shape{5, 3}));
  // A fresh adapter (B = 0) changes nothing; A is U(±1/√in) and not all zero.
  EXPECT_TRUE(all_close(lin.forward(x), before, 0, 0));
  const Tensor a = lin.lora_A().weight();
  double most = 0;
  for (int64_t i = 0; i < a.numel(); ++i) most = std::max(most, std::abs(a.to(DType::F64).data<double>()[i]));
  EXPECT_GT(most, 0.0);
  EXPECT_LE(most, 1 / std::sqrt(6.0));
  // Names as PEFT's below base_model.model.
  std::vector<std::string> names;
  for (const auto& [n, p] : lin.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "lora_A.weight", "lora_B.weight"}));

  Linear& ref = *adapted_ref;
  const Tensor x64 = randn({2, 4, 6}, 4);
  const Tensor expect = add(linear(x64, ref.weight(), ref.bias()),
                            mul_scalar(linear(linear(x64, ref.lora_A().weight()), ref.lora_B().weight()), 2.0));
  EXPECT_TRUE(all_close(ref.forward(x64), expect, 1e-12, 1e-12));
}

TEST(Lora, GradientsMatchFiniteDifferences) {
  const auto held = adapted(5);
  Linear& lin = *held;
  // x, A and B as inputs (the weight frozen, the bias trainable).
  EXPECT_TRUE(lb::testing::gradcheck(
      [&](const std::vector<Tensor>& in) {
        lin.lora_A().weight() = in[1];
        lin.lora_B().weight() = in[2];
        return lin.forward(in[0]);
      },
      {randn({2, 3, 6}, 6), randn({3, 6}, 7), randn({5, 3}, 8)}));
  // The frozen weight gets no gradient; the bias, A and B do.
  const auto held2 = adapted(9);
  Linear& l2 = *held2;
  Tensor y = sum(l2.forward(randn({2, 3, 6}, 10)));
  y.backward();
  EXPECT_FALSE(l2.weight().grad().defined());
  EXPECT_TRUE(l2.bias().grad().defined());
  EXPECT_TRUE(l2.lora_A().weight().grad().defined());
  EXPECT_TRUE(l2.lora_B().weight().grad().defined());
}

TEST(Lora, MergeEqualsUnmergedAndUnmergeRestores) {
  const auto held = adapted(11);
  Linear& lin = *held;
  const Tensor x = randn({3, 6}, 12);
  const Tensor w0 = lin.weight().clone();
  const Tensor unmerged = lin.forward(x);
  lin.merge_lora();
  EXPECT_TRUE(lin.lora_merged());
  EXPECT_TRUE(all_close(lin.forward(x), unmerged, 1e-12, 1e-12));
  lin.merge_lora();  // twice is once
  EXPECT_TRUE(all_close(lin.forward(x), unmerged, 1e-12, 1e-12));
  lin.unmerge_lora();
  EXPECT_FALSE(lin.lora_merged());
  EXPECT_TRUE(all_close(lin.weight(), w0, 1e-12, 1e-14));
  EXPECT_TRUE(all_close(lin.forward(x), unmerged, 1e-12, 1e-12));
}

// One forward/backward of an adapted layer from x0 with upstream gradient gy: x's gradient,
// and in *kept the bytes the tape kept for it.
Tensor input_gradient(Linear& lin, const Tensor& x0, const Tensor& gy, int64_t* kept) {
  Tensor x = x0.clone();
  x.set_requires_grad(true);
  const int64_t before = autograd::saved_bytes();
  const Tensor y = lin.forward(x);
  *kept = autograd::saved_bytes() - before;
  y.backward(gy);
  return x.grad();
}

// A frozen base layer under HOT: g_x on HOT's Hadamard + INT4 path (close to exact, not equal),
// nothing of x kept; under vanilla the plain op, exact.
TEST(Lora, FrozenBaseRunsHotsGxPathAndKeepsNothing) {
  Linear lin(64, 48);
  lin.add_lora({4, 8.0, 0.0});
  auto hot = backward::make_strategy({{"type", "hot"}}, "test");
  ASSERT_TRUE(hot->compresses_gx());
  hot->set_layer("q", 0);
  const Tensor x0 = randn({2, 32, 64}, 21).to(DType::F32);
  const Tensor gy = randn({2, 32, 48}, 22).to(DType::F32);
  const auto g_x = [&](std::shared_ptr<backward::Strategy> s, int64_t* kept) {
    lin.set_backward(std::move(s));
    return input_gradient(lin, x0, gy, kept);
  };
  int64_t kept_exact = 0, kept_hot = 0;
  const Tensor exact = g_x(nullptr, &kept_exact);
  const Tensor compressed = g_x(std::shared_ptr<backward::Strategy>(std::move(hot)), &kept_hot);
  const Tensor expect = matmul(gy, lin.weight());
  EXPECT_EQ(kept_hot, kept_exact);  // the adapter's input and rank-r product only
  EXPECT_FALSE(all_close(compressed, exact, 0, 0));
  const auto cos = [](const Tensor& a, const Tensor& b) {
    const auto u = a.to_double_vector(), v = b.to_double_vector();
    double uv = 0, uu = 0, vv = 0;
    for (size_t i = 0; i < u.size(); ++i) uv += u[i] * v[i], uu += u[i] * u[i], vv += v[i] * v[i];
    return uv / std::sqrt(uu * vv);
  };
  EXPECT_GT(cos(compressed, exact), 0.98);
  EXPECT_TRUE(all_close(exact, expect, 1e-5, 1e-5));  // B = 0: the adapter adds nothing to g_x yet
  EXPECT_FALSE(lin.weight().grad().defined());
}

// A frozen base layer under INSTANT: its calibration observes g_y alone (no basis for x, which
// it never keeps), and g_x = (G Qᵀ)(Q w) from that basis; nothing of x kept.
TEST(Lora, FrozenBaseRunsInstantsGxPathFromTheGradientBasisAlone) {
  Linear lin(64, 48);
  lin.add_lora({4, 8.0, 0.0});
  const Tensor x0 = randn({2, 32, 64}, 41).to(DType::F32);
  const Tensor gy = randn({2, 32, 48}, 42).to(DType::F32);
  const auto step = [&](int64_t* kept) { return input_gradient(lin, x0, gy, kept); };
  int64_t kept_exact = 0, kept_instant = 0, kept_calib = 0;
  const Tensor exact = step(&kept_exact);
  std::shared_ptr<backward::Strategy> s =
      backward::make_strategy({{"type", "instant"}, {"axis", "channel"}, {"rank", 4}}, "test");
  ASSERT_TRUE(s->compresses_gx());
  s->set_layer("q", 0);
  lin.set_backward(s);
  const auto& inst = dynamic_cast<const backward::Instant&>(*s);
  // Before any calibration: exact.
  EXPECT_TRUE(all_close(step(&kept_instant), exact, 0, 0));
  s->begin_calibration();
  EXPECT_TRUE(all_close(step(&kept_calib), exact, 0, 0));
  s->finish_calibration();
  EXPECT_TRUE(inst.g_basis().valid);
  EXPECT_FALSE(inst.x_basis().valid);
  EXPECT_EQ(inst.g_basis().choice.rank, 4);
  const Tensor low = step(&kept_instant);
  EXPECT_EQ(kept_instant, kept_exact);  // the adapter's input and rank-r product only
  EXPECT_EQ(kept_calib, kept_exact);
  const Tensor Q = inst.g_basis().proj.to(DType::F32);  // (4, 48)
  const Tensor expect = matmul(matmul(gy.view({64, 48}), Q, false, true), matmul(Q, lin.weight())).view({2, 32, 64});
  EXPECT_TRUE(all_close(low, expect, 1e-5, 1e-5));
  EXPECT_FALSE(all_close(low, exact, 1e-2, 1e-2));
  EXPECT_TRUE(s->summary().compressing);
  EXPECT_TRUE(s->report()["instant"]["frozen"].get<bool>());
  // The paper metrics count the g_x path as it ran (channel axis: w projected once per batch
  // of 2) and nothing kept of x.
  EXPECT_DOUBLE_EQ(s->summary().paper.backward_flops, 2.0 * 4 * (64 * 48 / 2.0 + 32 * 64 + 32 * 48));
  EXPECT_EQ(s->summary().paper.saved_bytes_fp32, 0.0);
  EXPECT_FALSE(lin.weight().grad().defined());
}

// Every strategy under LoRA passes the checks its own lossless setting passes without it:
// with the base frozen (g_x on the strategy's path, nothing kept for g_w), the adapted
// layer's gradients for x, A, B and the bias agree with finite differences in f64 (vanilla,
// INSTANT on either axis), or, for HOT, which runs on f32 only, with vanilla's to 1e-5 of
// their largest value (as Hot.LosslessEqualsVanillaLinear).
TEST(Lora, EveryStrategysLosslessSettingPassesTheGradientCheck) {
  const std::vector<nlohmann::json> specs = {
      {{"type", "vanilla"}},
      {{"type", "instant"}, {"axis", "token"}, {"rank", 1000}, {"compensate", false}, {"exact_when_no_gain", false},
       {"gram_dtype", "f64"}},
      {{"type", "instant"}, {"axis", "channel"}, {"rank", 1000}, {"compensate", false},
       {"exact_when_no_gain", false}, {"gram_dtype", "f64"}},
      {{"type", "hot"}, {"quantize", false}, {"full_basis", true}},
  };
  for (const nlohmann::json& spec : specs) {
    const bool f64 = spec["type"] != "hot";
    const DType dt = f64 ? DType::F64 : DType::F32;
    const auto held = adapted(51);
    Linear& lin = *held;
    lin.to(dt);
    std::shared_ptr<backward::Strategy> s = backward::make_strategy(spec, "test");
    s->set_layer("q", 0);
    lin.set_backward(s);
    const auto pass = [&] {  // x needs a gradient: else the frozen base has nothing to compute
      lin.forward(randn({2, 3, 6}, 52, dt).set_requires_grad()).backward(randn({2, 3, 5}, 53, dt));
    };
    s->begin_calibration();
    pass();
    s->finish_calibration();
    if (spec["type"] == "instant") {
      const auto& inst = dynamic_cast<const backward::Instant&>(*s);
      ASSERT_TRUE(inst.g_basis().valid) << spec.dump();
      EXPECT_EQ(inst.g_basis().choice.rank, inst.g_basis().n) << spec.dump();
    }
    const auto layer = [&](const std::vector<Tensor>& in) {
      lin.lora_A().weight() = in[1];
      lin.lora_B().weight() = in[2];
      lin.bias() = in[3];
      return lin.forward(in[0]);
    };
    const std::vector<Tensor> inputs = {randn({2, 3, 6}, 54, dt), randn({3, 6}, 55, dt), randn({5, 3}, 56, dt),
                                        randn({5}, 57, dt)};
    if (f64) {
      EXPECT_TRUE(lb::testing::gradcheck(layer, inputs)) << spec.dump();
    } else {  // against the same layer with no strategy (the plain ops)
      const auto grads = [&] {
        std::vector<Tensor> in;
        for (const Tensor& t : inputs) in.push_back(t.clone().set_requires_grad());
        layer(in).backward(randn({2, 3, 5}, 58, dt));
        std::vector<Tensor> g;
        for (const Tensor& t : in) g.push_back(t.grad());
        return g;
      };
      const std::vector<Tensor> got = grads();
      lin.set_backward(nullptr);
      const std::vector<Tensor> expect = grads();
      lin.set_backward(s);
      for (size_t i = 0; i < got.size(); ++i) {
        double most = 0;
        for (double v : expect[i].to_double_vector()) most = std::max(most, std::abs(v));
        EXPECT_TRUE(all_close(got[i], expect[i], 0, 1e-5 * most)) << spec.dump() << " input " << i;
      }
      // HOT's paper metrics for the frozen base: its g_x path alone (L 3, I 6, O 5 padded to 16).
      EXPECT_DOUBLE_EQ(s->summary().paper.backward_flops, 2.0 * 3 * 16 * 6 + 4.0 * (3 * 16 + 16 * 6));
      EXPECT_EQ(s->summary().paper.saved_bytes_fp32, 0.0);
    }
    // The base ran on the strategy's own g_x path (vanilla's is the plain op).
    EXPECT_EQ(s->record().frozen, spec["type"] != "vanilla") << spec.dump();
    if (spec["type"] == "instant") EXPECT_TRUE(s->summary().compressing) << spec.dump();
    EXPECT_FALSE(lin.weight().grad().defined()) << spec.dump();
  }
}

// The adapter keeps its input once: with lora_dropout, where the base input is an output
// its producer can give back (a LayerNorm's here, as in BERT), the down-projection keeps the
// producer's tensors and the dropout mask, nothing activation-sized of its own; the
// gradients are those of the path that keeps the dropped-out copy, bit for bit.
TEST(Lora, AdapterWithDropoutKeepsNoCopyOfItsInput) {
  Linear lin(64, 48);
  lin.add_lora({4, 8.0, 0.5});
  lin.lora_B().weight().copy_(randn({48, 4}, 31).to(DType::F32));
  const Tensor x0 = randn({2, 16, 64}, 32).to(DType::F32);
  const Tensor gamma = randn({64}, 33).to(DType::F32), beta = randn({64}, 34).to(DType::F32);
  struct Run {
    int64_t kept;
    Tensor g_x, g_a, g_b;
  };
  const auto run = [&](bool recipe) {
    Tensor x = x0.clone();
    x.set_requires_grad(true);
    lin.zero_grad();
    manual_seed(35);
    Tensor h = layer_norm(x, gamma, beta);
    if (!recipe) h = mul_scalar(h, 1.0);  // the same values, with no way back to them
    const int64_t before = autograd::saved_bytes();
    const Tensor y = lin.forward(h);
    const int64_t kept = autograd::saved_bytes() - before;
    y.backward(randn({2, 16, 48}, 36).to(DType::F32));
    return Run{kept, x.grad(), lin.lora_A().weight().grad(), lin.lora_B().weight().grad()};
  };
  const Run lean = run(true), copy = run(false);
  const int64_t activation = 2 * 16 * 64 * 4;
  EXPECT_EQ(copy.kept - lean.kept, activation);
  EXPECT_LT(lean.kept, activation / 8);  // the mask (1 bit per element), the rank-4 product
  EXPECT_TRUE(all_close(lean.g_x, copy.g_x, 0, 0));
  EXPECT_TRUE(all_close(lean.g_a, copy.g_a, 0, 0));
  EXPECT_TRUE(all_close(lean.g_b, copy.g_b, 0, 0));
}

TEST(Lora, TargetsMatchAsPeft) {
  const std::vector<std::string> list = {"query", "attention.output.dense"};
  EXPECT_TRUE(lora_target_matches("bert.encoder.layer.0.attention.self.query", list, false));
  EXPECT_TRUE(lora_target_matches("query", list, false));
  EXPECT_TRUE(lora_target_matches("bert.encoder.layer.3.attention.output.dense", list, false));
  EXPECT_FALSE(lora_target_matches("bert.encoder.layer.0.attention.self.subquery", list, false));
  EXPECT_FALSE(lora_target_matches("bert.encoder.layer.0.output.dense", list, false));
  EXPECT_FALSE(lora_target_matches("bert.encoder.layer.0.attention.self.query.lora_A", list, false));
  const std::vector<std::string> re = {R"(.*layer\.[01]\.attention\.self\.(query|value))"};
  EXPECT_TRUE(lora_target_matches("bert.encoder.layer.1.attention.self.value", re, true));
  EXPECT_FALSE(lora_target_matches("bert.encoder.layer.2.attention.self.value", re, true));
  EXPECT_FALSE(lora_target_matches("bert.encoder.layer.1.attention.self.value.x", re, true));
}

// Against Hugging Face PEFT (tools/golden/gen_lora.py): a tiny BERT with r = 4 adapters on
// query and value and the classifier trained in full; logits, loss, the trainable parameters'
// gradients and three AdamW steps in f64.
TEST(Lora, MatchesPeftOnTinyBert) {
  const auto f = lb::testing::load_fixture("model_bert_lora");
  models::BertForSequenceClassification model(lb::testing::golden_bert_config(3));
  const auto adapted = apply_lora(model, {4, 8.0, 0.0}, {{"query", "value"}, false, {"classifier"}, "none"});
  EXPECT_EQ(adapted.size(), 4u);
  model.to(DType::F64);
  std::map<std::string, Tensor> w;
  for (const auto& [n, t] : f.tensors)
    if (n.rfind("w.", 0) == 0) w[n.substr(2)] = t;
  model.load_state_dict(w);  // strict: PEFT's keys are ours
  model.train();
  const Tensor ids = f.at("in.input_ids"), types = f.at("in.token_type_ids");
  const Tensor keep = f.at("in.attention_mask"), labels = f.at("in.labels");
  const auto forward = [&] { return model.forward(ids, types, keep, labels); };
  auto out = forward();
  EXPECT_LT(lb::testing::rel_error(out.logits, f.at("logits")), 1e-10);
  EXPECT_LT(lb::testing::rel_error(out.loss, f.at("loss")), 1e-10);
  out.loss.backward();
  int trained = 0;
  for (auto& [name, p] : model.named_parameters()) {
    const Tensor* want = f.find("g." + name);
    if (want == nullptr) {
      EXPECT_FALSE(p.requires_grad()) << name;
      EXPECT_FALSE(p.grad().defined()) << name;
      continue;
    }
    ++trained;
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_LT(lb::testing::rel_error(p.grad(), *want), 1e-9) << name;
  }
  EXPECT_EQ(trained, 10);  // 4 adapters x (A, B) and the classifier's weight and bias
  optim::AdamOptions a;
  a.decoupled = true;
  optim::Adam opt(optim::param_groups_with_decay(model.named_parameters(), 1e-3, 0.01, {"*bias"}), a);
  const auto losses = f.at("losses").to_double_vector();
  opt.step();
  for (int s = 1; s < 3; ++s) {
    opt.zero_grad();
    auto o = forward();
    EXPECT_NEAR(o.loss.item_double(), losses[s], 1e-9 * std::abs(losses[s])) << "step " << s;
    o.loss.backward();
    opt.step();
  }
  NoGradGuard ng;
  EXPECT_NEAR(forward().loss.item_double(), losses[3], 1e-9 * std::abs(losses[3])) << "after 3 steps";
}

// With dropout on (the model's and the adapters', p 0.3), the gradient the tape gives the
// adapters and the head is the derivative of the very loss the forward computed: with the
// draws replayed, central differences agree. Without strategies, and with every Linear on the
// strategy path as in training (the frozen base on the plain op).
TEST(Lora, GradientsUnderDropoutMatchFiniteDifferencesOnTinyBert) {
  const auto f = lb::testing::load_fixture("model_bert_lora");
  models::BertConfig cfg = lb::testing::golden_bert_config(3);
  cfg.hidden_dropout_prob = 0.3;
  cfg.attention_probs_dropout_prob = 0.3;
  const Tensor ids = f.at("in.input_ids"), types = f.at("in.token_type_ids");
  const Tensor keep = f.at("in.attention_mask"), labels = f.at("in.labels");
  for (const bool strategies : {false, true}) {
    manual_seed(7);
    models::BertForSequenceClassification model(cfg);
    apply_lora(model, {4, 8.0, 0.3}, {{"query", "value"}, false, {"classifier"}, "none"});
    model.to(DType::F64);
    uint64_t b_seed = 40;
    for (auto& [name, p] : model.named_parameters())
      if (name.find(".lora_B.") != std::string::npos) p.copy_(randn(p.shape(), ++b_seed));  // A gets gradients
    if (strategies)
      for (auto& [name, m] : model.named_modules())
        if (auto* lin = dynamic_cast<Linear*>(m)) lin->set_backward(backward::make_strategy({{"type", "vanilla"}}, name));
    model.train();
    const PhiloxStream::State draws = default_generator().state();
    const auto loss = [&] {
      default_generator().set_state(draws);
      return model.forward(ids, types, keep, labels).loss;
    };
    loss().backward();
    int checked = 0;
    for (auto& [name, p] : model.named_parameters()) {
      if (!p.requires_grad()) continue;
      ASSERT_TRUE(p.grad().defined()) << name;
      double* v = p.data<double>();
      for (const int64_t i : {int64_t{0}, p.numel() / 2, p.numel() - 1}) {
        const double at = v[i], eps = 1e-6;
        NoGradGuard ng;
        v[i] = at + eps;
        const double up = loss().item_double();
        v[i] = at - eps;
        const double down = loss().item_double();
        v[i] = at;
        const double fd = (up - down) / (2 * eps), g = p.grad().data<double>()[i];
        EXPECT_NEAR(g, fd, 1e-6 * std::max(1.0, std::abs(fd))) << name << "[" << i << "], strategies " << strategies;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 3 * 10);  // 4 adapters x (A, B) and the head's weight and bias
  }
}

}  // namespace
}  // namespace lb::nn

namespace lb::train {
namespace {

using lb::testing::error_message;

nlohmann::json lora_config(nlohmann::json lora) {
  nlohmann::json j = lb::testing::tiny_bert_config(3);
  j["lora"] = std::move(lora);
  return j;
}

TEST(Lora, TrainsOnlyAdaptersAndHeadOnSmallBert) {
  lb::testing::TempDir tmp("lb_lora");
  const Config c = Config::from_json(lora_config({{"r", 4}, {"alpha", 8}}), "lora.json");
  TrainingSetup s = set_up_training(resolved_for_training(c), "", Device::cpu(), dist::single_process());
  nn::Module& m = s.model->module();
  int64_t adapters = 0, trainable = 0;
  std::map<std::string, Tensor> before;
  for (const auto& [name, p] : m.named_parameters()) {
    before[name] = p.clone();
    const bool adapter = name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
    adapters += adapter;
    if (p.requires_grad()) {
      ++trainable;
      EXPECT_TRUE(adapter || name.rfind("classifier.", 0) == 0) << name;
    }
  }
  EXPECT_EQ(adapters, 2 * 2 * 2);  // query and value of both layers, A and B
  EXPECT_EQ(trainable, adapters + 2);  // and the classifier's weight and bias
  // The optimizer holds state for the trainable parameters alone.
  int64_t in_optimizer = 0;
  for (const auto& g : s.optimizer->groups()) in_optimizer += static_cast<int64_t>(g.params.size());
  EXPECT_EQ(in_optimizer, trainable);

  // Training: the base stays as it was, the adapters and head move; the checkpoint has them.
  const TrainResult r = train(c, lb::testing::quiet(tmp.sub("run")));
  EXPECT_EQ(r.losses.size(), 3u);
  const io::SafetensorsFile saved = io::load_safetensors(r.last_checkpoint + "/model.safetensors");
  for (const auto& [name, p] : before) {
    ASSERT_NE(saved.find(name), nullptr) << name;
    const Tensor now = *saved.find(name);
    const bool moves = name.find(".lora_B.") != std::string::npos || name.rfind("classifier.", 0) == 0;
    if (moves) EXPECT_FALSE(lb::testing::all_close(now, p, 0, 0)) << name;
    else if (name.find(".lora_A.") == std::string::npos) EXPECT_TRUE(lb::testing::all_close(now, p, 0, 0)) << name;
  }
  EXPECT_EQ(io::read_json_file(r.run_dir + "/config.json")["lora"]["r"], 4);
  // plan.txt shows base and adapter per layer.
  const nlohmann::json plan = s.plan.to_json();
  int with_adapter = 0;
  for (const auto& l : plan["layers"]) {
    const bool targeted = l["layer"].get<std::string>().find(".query") != std::string::npos ||
                          l["layer"].get<std::string>().find(".value") != std::string::npos;
    EXPECT_EQ(l.contains("lora"), targeted) << l;
    with_adapter += l.contains("lora");
  }
  EXPECT_EQ(with_adapter, 4);
  EXPECT_NE(s.plan.table().find("attention.self.query    Linear  vanilla   backward.default; + LoRA adapter r 4, alpha 8"),
            std::string::npos)
      << s.plan.table();
}

// LoRA under --strategy hot: every frozen encoder Linear computes g_x on HOT's path (plan.txt
// says so), the adapters train, the losses are finite.
TEST(Lora, TrainsUnderHotWithFrozenLayersOnItsGxPath) {
  lb::testing::TempDir tmp("lb_lora");
  TrainOptions o = lb::testing::quiet(tmp.sub("run"));
  o.strategy = "hot";
  const TrainResult r = train(Config::from_json(lora_config({{"r", 4}}), "lora.json"), o);
  ASSERT_EQ(r.losses.size(), 3u);
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l));
  std::ifstream txt(r.run_dir + "/plan.txt");
  const std::string table((std::istreambuf_iterator<char>(txt)), std::istreambuf_iterator<char>());
  size_t on_hot = 0;
  for (size_t at = 0; (at = table.find("frozen weight: g_x only, on hot's path", at)) != std::string::npos; ++at) ++on_hot;
  EXPECT_EQ(on_hot, 12u) << table;  // 6 Linear layers in each of the 2 encoder layers
}

TEST(Lora, BadSettingsAreErrorsNamingTheJsonPath) {
  const auto msg = [](const nlohmann::json& lora) {
    return error_message([&] {
      const Config c = resolved_for_training(Config::from_json(lora_config(lora), "lora.json"));
      set_up_training(c, "", Device::cpu(), dist::single_process());
    });
  };
  std::string m = msg({{"r", 0}});
  EXPECT_NE(m.find("lora.json: lora.r"), std::string::npos) << m;
  m = msg({{"target_modules", {"query", "nothing"}}});
  EXPECT_NE(m.find("lora.json: lora.target_modules[1] 'nothing' matches no module"), std::string::npos) << m;
  m = msg({{"target_modules", {"LayerNorm"}}});
  EXPECT_NE(m.find("lora.target_modules[0] 'LayerNorm' matches 'bert.embeddings.LayerNorm', a LayerNorm; LoRA "
                   "adapts Linear layers only"),
            std::string::npos)
      << m;
  m = msg({{"target_modules", "(unclosed"}});
  EXPECT_NE(m.find("lora.target_modules: '(unclosed' is not a regular expression"), std::string::npos) << m;
  m = msg({{"target_modules", ".*nothing"}});
  EXPECT_NE(m.find("lora.target_modules '.*nothing' matches no module"), std::string::npos) << m;
  m = msg({{"bias", "some"}});
  EXPECT_NE(m.find("lora.bias"), std::string::npos) << m;
  m = msg({{"modules_to_save", {"dropout"}}});
  EXPECT_NE(m.find("with no parameters to train"), std::string::npos) << m;
  m = msg({{"rank", 8}});
  EXPECT_NE(m.find("lora"), std::string::npos) << m;
  EXPECT_NE(m.find("rank"), std::string::npos) << m;
  // --set lora.r=16 turns it on from the command line.
  nlohmann::json j = lb::testing::tiny_bert_config(1);
  apply_override(j, "lora.r=16");
  const Config c = Config::from_json(j, "x.json");
  EXPECT_TRUE(c.lora.enabled);
  EXPECT_EQ(c.lora.settings.r, 16);
}

// The shipped LoRA config reads and resolves (its model and data need not be here).
TEST(Lora, ShippedConfigReads) {
  const std::string path = std::string(LB_FIXTURES_DIR) + "/../../configs/minilm_mrpc_lora.json";
  const Config c = Config::from_json(read_config_json(path), path);
  EXPECT_TRUE(c.lora.enabled);
  EXPECT_EQ(c.lora.settings.r, 8);
  EXPECT_DOUBLE_EQ(c.lora.settings.scale(), 2.0);
  EXPECT_EQ(c.lora.targets.modules, (std::vector<std::string>{"query", "value"}));
  EXPECT_EQ(Config::from_json(c.to_json(), "again").lora.to_json(), c.lora.to_json());
}

TEST(Lora, BiasSettingsChooseWhichBiasesTrain) {
  for (const std::string bias : {"none", "all", "lora_only"}) {
    const Config c = resolved_for_training(Config::from_json(lora_config({{"bias", bias}}), "lora.json"));
    TrainingSetup s = set_up_training(c, "", Device::cpu(), dist::single_process());
    for (const auto& [name, p] : s.model->module().named_parameters()) {
      if (name.size() < 5 || name.compare(name.size() - 5, 5, ".bias") != 0 || name.rfind("classifier.", 0) == 0)
        continue;
      const bool targeted = name.find(".query.") != std::string::npos || name.find(".value.") != std::string::npos;
      const bool expect = bias == "all" || (bias == "lora_only" && targeted);
      EXPECT_EQ(p.requires_grad(), expect) << bias << " " << name;
    }
  }
}

}  // namespace
}  // namespace lb::train
