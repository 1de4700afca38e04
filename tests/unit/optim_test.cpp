// Optimizer mechanics (no fixtures): schedules, clipping, parameter groups, state round trip,
// and a convergence check on a quadratic.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/ops.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"
#include "testing/testing.h"

namespace lb::optim {
namespace {

TEST(LrSchedule, HandComputedValues) {
  const LrSchedule lin{ScheduleKind::Linear, 10, 110, 0.0};
  EXPECT_DOUBLE_EQ(lin.factor(0), 0.0);
  EXPECT_DOUBLE_EQ(lin.factor(5), 0.5);
  EXPECT_DOUBLE_EQ(lin.factor(10), 1.0);
  EXPECT_DOUBLE_EQ(lin.factor(60), 0.5);
  EXPECT_DOUBLE_EQ(lin.factor(110), 0.0);
  EXPECT_DOUBLE_EQ(lin.factor(500), 0.0);
  const LrSchedule cos{ScheduleKind::Cosine, 0, 100, 0.1};
  EXPECT_DOUBLE_EQ(cos.factor(0), 1.0);
  EXPECT_NEAR(cos.factor(50), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(cos.factor(100), 0.1, 1e-12);
  const LrSchedule c{ScheduleKind::Constant, 4, 0, 0};
  EXPECT_DOUBLE_EQ(c.factor(2), 0.5);
  EXPECT_DOUBLE_EQ(c.factor(1000), 1.0);
}

TEST(LrSchedule, JsonErrorsNamePath) {
  EXPECT_EQ(LrSchedule::from_json({{"type", "cosine"}, {"total_steps", 10}, {"min_ratio", 0.2}},
                                  "train.schedule")
                .kind,
            ScheduleKind::Cosine);
  try {
    LrSchedule::from_json({{"type", "step"}}, "train.schedule");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.schedule.type"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LrSchedule::from_json({{"warmup", 3}}, "s"), Error);
  EXPECT_THROW(LrSchedule::from_json({{"type", "linear"}, {"total_steps", -1}}, "s"), Error);
}

TEST(ClipGradNorm, ScalesToMaxNorm) {
  Tensor a = Tensor::zeros({2}, DType::F64), b = Tensor::zeros({1}, DType::F64);
  a.set_requires_grad();
  b.set_requires_grad();
  a.set_grad(Tensor::from_vector<double>({3, 0}, {2}));
  b.set_grad(Tensor::from_vector<double>({4}, {1}));
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0), 5.0, 1e-12);
  EXPECT_NEAR(a.grad().to_double_vector()[0], 3.0 / (5.0 + 1e-6), 1e-12);
  EXPECT_NEAR(clip_grad_norm({a, b}, 10.0), 1.0, 1e-6);  // below max: unchanged
}

TEST(ParamGroups, NoDecayForBiasAndNorms) {
  NamedTensors named;
  for (const char* n : {"encoder.dense.weight", "encoder.dense.bias", "encoder.LayerNorm.weight",
                        "encoder.LayerNorm.bias", "frozen.weight"}) {
    Tensor t = Tensor::zeros({2});
    t.set_requires_grad(std::string(n) != "frozen.weight");
    named.emplace_back(n, t);
  }
  const auto groups = param_groups_with_decay(named, 1e-3, 0.01);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].params.size(), 1u);
  EXPECT_EQ(groups[0].params[0].first, "encoder.dense.weight");
  EXPECT_EQ(groups[1].params.size(), 3u);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
}

TEST(Optimizer, AdamWConvergesAndStateRoundTrips) {
  Tensor p = Tensor::full({3}, 5.0, DType::F64);
  p.set_requires_grad();
  Adam opt(single_group({{"p", p}}, 0.1), AdamOptions{});
  for (int i = 0; i < 300; ++i) {
    opt.zero_grad();
    sum(mul(p, p)).backward();
    opt.step();
  }
  for (double v : p.to_double_vector()) EXPECT_NEAR(v, 0.0, 0.05);
  // Save state, continue 5 steps; restore into a fresh optimizer from the saved point,
  // continue 5 steps: identical parameters.
  const auto js = opt.state_json();
  std::map<std::string, Tensor> ts;
  for (auto& [n, t] : opt.state_tensors()) ts[n] = t.clone();
  Tensor p_saved = p.detach().clone();
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad();
    sum(mul(p, p)).backward();
    opt.step();
  }
  Tensor q = p_saved.clone();
  q.set_requires_grad();
  Adam opt2(single_group({{"p", q}}, 0.1), AdamOptions{});
  opt2.load_state(js, ts);
  EXPECT_EQ(opt2.step_count(), 300);
  for (int i = 0; i < 5; ++i) {
    opt2.zero_grad();
    sum(mul(q, q)).backward();
    opt2.step();
  }
  EXPECT_EQ(q.to_double_vector(), p.to_double_vector());
  SGD sgd(single_group({{"p", q}}, 0.1));
  EXPECT_THROW(sgd.load_state(js, ts), Error);
}

TEST(Optimizer, BadHyperparameters) {
  Tensor p = Tensor::zeros({1});
  p.set_requires_grad();
  EXPECT_THROW(SGD(single_group({{"p", p}}, -1.0)), Error);
  EXPECT_THROW(SGD(single_group({{"p", p}}, 0.1), SgdOptions{0.0, 0.0, true}), Error);
  EXPECT_THROW(Adam(single_group({{"p", p}}, 0.1), AdamOptions{1.0, 0.999, 1e-8, true}), Error);
}

}  // namespace
}  // namespace lb::optim
