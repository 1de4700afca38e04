// The optimizer step fused into backward (config optimizer.in_backward): without clipping it
// gives the unfused run's losses and weights bit for bit — with gradient accumulation, a
// recomputed block and every backward strategy — while the gradients never all exist at once
// and the embeddings' gradients are kept as their touched rows only;
// with clipping, the first step's norm is the unfused one's and later steps scale by the
// previous norm, which a resumed run restores; a parameter both inside and outside a
// recomputed block is a named error, not a double update.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lb/io/safetensors.h"
#include "lb/train/trainer.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

std::map<std::string, std::vector<double>> weights(const std::string& ckpt) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [n, t] : io::load_safetensors(ckpt + "/model.safetensors").tensors) out[n] = t.to_double_vector();
  return out;
}

// The least of the steps' gradient peaks (a step whose window held a calibration pass has the
// full gradients of that pass in it).
double gradient_peak(const std::string& run) {
  double peak = 1e300;
  for (const auto& line : testing::train_lines(run))
    peak = std::min(peak, line["peak_bytes_by_tag"]["gradient"].get<double>());
  return peak;
}

// Runs the tiny BERT unfused and fused; expects the same losses and weights bit for bit, and
// returns the two runs' gradient peaks.
std::pair<double, double> fused_and_unfused(const std::string& strategy, int64_t grad_accum) {
  testing::TempDir tmp("lb_fused");
  nlohmann::json j = testing::tiny_bert_config(4);
  j["model"]["vocab_size"] = 4096;  // a word embedding larger than the rest of the model
  j["train"]["max_grad_norm"] = 0;
  j["train"]["grad_accum"] = grad_accum;
  j["train"]["log_every"] = 1;
  j["memory"] = {{"recompute", {"bert.encoder.layer.1"}}};
  TrainOptions plain = testing::quiet(tmp.sub("plain")), fused = testing::quiet(tmp.sub("fused"));
  plain.strategy = fused.strategy = strategy;
  const TrainResult a = train(Config::from_json(j, "tiny.json"), plain);
  j["optimizer"]["in_backward"] = true;
  const TrainResult b = train(Config::from_json(j, "tiny.json"), fused);
  EXPECT_EQ(a.losses.size(), 4u);
  EXPECT_EQ(a.losses, b.losses) << strategy << ", grad_accum " << grad_accum;
  EXPECT_EQ(weights(a.last_checkpoint), weights(b.last_checkpoint)) << strategy << ", grad_accum " << grad_accum;
  return {gradient_peak(tmp.sub("plain")), gradient_peak(tmp.sub("fused"))};
}

TEST(OptimizerInBackward, EqualsTheUnfusedStepWithoutClipping) {
  for (const std::string strategy : {"vanilla", "instant", "hot"}) {
    const auto [plain, fused] = fused_and_unfused(strategy, 1);
    // Each gradient is freed once applied: the step's gradient peak is a fraction of the model's.
    EXPECT_LT(fused, 0.5 * plain) << strategy;
  }
  // Accumulation: the first micro-batch's gradients are all kept, the last micro-batch updates
  // as it goes. The embeddings' gradients stay rows throughout: the word embedding's dense
  // gradient (4096 x 32 f32, most of the model's) never exists; its rows do (each micro-batch's,
  // at most its tokens, and their sum).
  const auto [plain, fused] = fused_and_unfused("vanilla", 2);
  const double word_embedding = 4096.0 * 32 * 4, batch_rows = 4.0 * 8 * 32 * 32 * 4;
  EXPECT_LT(fused, plain - word_embedding + batch_rows);
}

TEST(OptimizerInBackward, ClipsByThePreviousNormAndResumesExactly) {
  testing::TempDir tmp("lb_fused_clip");
  nlohmann::json j = testing::tiny_bert_config(6);
  j["train"]["max_grad_norm"] = 0.05;  // binds: the tiny model's norms are larger
  j["train"]["log_every"] = 1;
  // SGD: Adam's update hardly changes when every gradient is scaled alike, SGD's does.
  j["optimizer"] = {{"type", "sgd"}, {"lr", 0.5}};
  const TrainResult plain = train(Config::from_json(j, "tiny.json"), testing::quiet(tmp.sub("plain")));
  j["optimizer"]["in_backward"] = true;
  const Config c = Config::from_json(j, "tiny.json");
  const TrainResult full = train(c, testing::quiet(tmp.sub("full")));
  const auto norms = [&](const std::string& run) {
    std::vector<double> out;
    for (const auto& line : testing::train_lines(run)) out.push_back(line["grad_norm"].get<double>());
    return out;
  };
  const std::vector<double> a = norms(tmp.sub("plain")), b = norms(tmp.sub("full"));
  ASSERT_EQ(a.size(), 6u);
  ASSERT_GT(a[0], 0.05);
  EXPECT_NEAR(b[0], a[0], 1e-9 * a[0]);  // the same weights, the same gradient; summed in another order
  // Step 1 warms up from rate 0; step 2 is clipped by its own norm unfused, by step 1's fused.
  EXPECT_EQ(plain.losses[1], full.losses[1]);
  EXPECT_NE(plain.losses[2], full.losses[2]);
  TrainOptions first = testing::quiet(tmp.sub("cut"));
  first.interrupt_after = 3;
  ASSERT_TRUE(train(c, first).interrupted);
  TrainOptions second = testing::quiet(tmp.sub("cut"));
  second.resume = tmp.sub("cut");
  const TrainResult rest = train(c, second);
  ASSERT_EQ(rest.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rest.losses[i], full.losses[3 + i]) << "step " << 3 + i;
  EXPECT_EQ(weights(rest.last_checkpoint), weights(full.last_checkpoint));
}

}  // namespace
}  // namespace lb::train
