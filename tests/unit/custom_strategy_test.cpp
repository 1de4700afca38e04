// A fourth backward strategy, written as the seam asks of its author: one class (its type, its
// settings, a clone, what forward keeps and the backward from it) and one entry in the factory
// table; the base does the rest (calibration routing, fallback, frozen and deferred calls,
// accounting, reports) through the layer's record. This one keeps x in bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "lb/nn/backward/factory.h"
#include "lb/ops.h"
#include "lb/train/trainer.h"
#include "testing/strategies.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::nn::backward {
namespace {

class KeepBf16 : public Strategy {
 public:
  std::string type() const override { return "keep_bf16"; }
  nlohmann::json hyperparams() const override { return {{"type", "keep_bf16"}}; }
  std::unique_ptr<Strategy> clone() const override { return std::make_unique<KeepBf16>(); }

 protected:
  SavedState save_impl(const Tensor& x, const Tensor&, const CallContext&) override {
    SavedState s;
    s.tensors = {x.to(DType::BF16)};
    return s;
  }
  Gradients backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                          bool want_gw) override {
    const int64_t B = s.geom.B, L = s.geom.L, I = s.geom.I, O = s.geom.O;
    Gradients g;
    if (want_gx) g.grad_input = matmul(g_y, w);
    if (want_gw)
      g.grad_weight = matmul(g_y.reshape({B * L, O}), s.tensors.at(0).to(DType::F32).reshape({B * L, I}), true, false);
    return g;
  }
};

void register_once() {
  static const bool done = [] {
    register_strategy_type("keep_bf16", [](JsonReader&) { return std::make_unique<KeepBf16>(); });
    return true;
  }();
  (void)done;
}

TEST(CustomStrategy, OneClassAndOneTableEntry) {
  register_once();
  EXPECT_THROW(register_strategy_type("keep_bf16", [](JsonReader&) { return std::make_unique<KeepBf16>(); }),
               Error);
  const auto types = strategy_types();
  EXPECT_NE(std::find(types.begin(), types.end(), "keep_bf16"), types.end());
  // Settings it does not read are refused, as for the built-in strategies.
  EXPECT_THROW(make_strategy({{"type", "keep_bf16"}, {"rank", 4}}, "backward.default"), Error);

  std::shared_ptr<Strategy> mine = make_strategy({{"type", "keep_bf16"}}, "backward.default");
  std::shared_ptr<Strategy> exact = make_strategy({{"type", "vanilla"}}, "backward.default");
  mine->set_layer("enc.fc", 0);
  const Tensor x = lb::testing::randn({2, 5, 8}, 1, DType::F32), w = lb::testing::randn({3, 8}, 2, DType::F32);
  const Tensor b = lb::testing::randn({3}, 3, DType::F32), g = lb::testing::randn({2, 5, 3}, 4, DType::F32);
  const auto a = lb::testing::run_linear(mine, x, w, b, g);
  const auto e = lb::testing::run_linear(exact, x, w, b, g);
  EXPECT_EQ(a.gx.to_double_vector(), e.gx.to_double_vector());  // g_y w reads no x
  EXPECT_EQ(a.gb.to_double_vector(), e.gb.to_double_vector());
  const auto gw = a.gw.to_double_vector(), gw_exact = e.gw.to_double_vector();
  for (size_t i = 0; i < gw.size(); ++i) EXPECT_NEAR(gw[i], gw_exact[i], 2e-2 * (1 + std::abs(gw_exact[i]))) << i;
  // The base accounted for it: calls, geometry, the bytes it kept (x in bf16), its report.
  const LayerRecord& r = mine->record();
  EXPECT_EQ(r.measured.calls, 1);
  EXPECT_EQ(r.measured.last_geom.L, 5);
  EXPECT_EQ(r.measured.last_saved_bytes, 2 * 5 * 8 * 2);
  EXPECT_EQ(mine->report()["type"], "keep_bf16");
  EXPECT_EQ(mine->report()["layer"], "enc.fc");
}

TEST(CustomStrategy, TrainsAModelFromAConfig) {
  register_once();
  lb::testing::TempDir tmp("lb_custom_strategy");
  nlohmann::json j = lb::testing::tiny_bert_config(4, /*dropout=*/0.0);
  j["backward"] = {{"default", {{"type", "keep_bf16"}}}};
  train::TrainOptions o = lb::testing::quiet(tmp.sub("run"));
  const train::TrainResult r = train::train(train::Config::from_json(j, "tiny.json"), o);
  ASSERT_EQ(r.losses.size(), 4u);
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l));
  const auto results = nlohmann::json::parse(std::ifstream(tmp.sub("run") + "/eval_results.json"));
  int mine = 0;
  for (const auto& l : results["layers"]) mine += l["type"] == "keep_bf16";
  EXPECT_GT(mine, 0) << results["layers"].dump();
}

}  // namespace
}  // namespace lb::nn::backward
