// Progress of the phases that are not training steps (issue: no silent phase): PhaseProgress's
// lines, an evaluation reporting each batch, a calibration reporting its passes and layers.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "lb/dist/process_group.h"
#include "lb/nn/backward/calibration.h"
#include "lb/train/evaluate.h"
#include "lb/train/run/progress.h"
#include "lb/train/train_step.h"
#include "src/train/training_setup.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

using std::chrono::milliseconds;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TrainingSetup tiny_setup(const nlohmann::json& backward = nlohmann::json()) {
  nlohmann::json j = lb::testing::tiny_bert_config(2, /*dropout=*/0.0);
  if (!backward.is_null()) j["backward"] = backward;
  return set_up_training(resolved_for_training(Config::from_json(j, "tiny.json")), "", Device::cpu(),
                         dist::single_process());
}

TEST(PhaseProgress, LogsKOfNAndACloseOnceItRunsLong) {
  ::testing::internal::CaptureStderr();
  {
    PhaseProgress p("calibration before step 1", /*bar=*/false, /*quiet=*/false, milliseconds(0), milliseconds(0));
    p.update("batches", 1, 4);
    p.update("batches", 4, 4);
    p.update("layers", 2, 6);
    p.finish();
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("calibration before step 1: 1/4 batches  0:00  ETA 0:"), std::string::npos) << out;
  EXPECT_NE(out.find("calibration before step 1: 2/6 layers"), std::string::npos) << out;
  EXPECT_NE(out.find("calibration before step 1: done, 6 layers in "), std::string::npos) << out;
  // A phase shorter than its first line says nothing at all; quiet says nothing either.
  ::testing::internal::CaptureStderr();
  {
    PhaseProgress quick("evaluation", false, false);
    quick.update("batches", 3, 3);
    quick.finish();
    PhaseProgress quiet("evaluation", false, /*quiet=*/true, milliseconds(0), milliseconds(0));
    quiet.update("batches", 3, 3);
    quiet.finish();
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(PhaseProgress, EvaluationReportsEveryBatch) {
  TrainingSetup s = tiny_setup();
  const int64_t batches = s.eval_loader->batches_per_epoch();
  ASSERT_GT(batches, 1);
  ::testing::internal::CaptureStderr();
  {
    PhaseProgress p("evaluation at step 0", false, false, milliseconds(0), milliseconds(0));
    evaluate(*s.model, *s.eval_loader, s.data, false, &p);
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  const std::string n = "/" + std::to_string(batches) + " batches";
  EXPECT_EQ(count(out, "evaluation at step 0: "), static_cast<size_t>(batches + 2)) << out;  // 0..n, done
  EXPECT_NE(out.find("evaluation at step 0: 1" + n), std::string::npos) << out;
  EXPECT_NE(out.find("evaluation at step 0: done, " + std::to_string(batches) + " batches"), std::string::npos)
      << out;
}

TEST(PhaseProgress, CalibrationReportsItsPassesAndLayers) {
  TrainingSetup s = tiny_setup({{"default", {{"type", "instant"}, {"rank", 4}, {"calib_batches", 3}}}});
  TrainStep step(s.model->module(), *s.optimizer, train_step_options(Config(), s, dist::single_process(),
                                                                        Device::cpu()));
  nn::backward::Calibrator calibrator(s.strategies);
  std::vector<std::tuple<std::string, int64_t, int64_t>> heard;
  calibrator.set_progress([&](const std::string& stage, int64_t done, int64_t total) {
    heard.emplace_back(stage, done, total);
  });
  s.model->module().train();
  int64_t next = 0;
  ASSERT_TRUE(calibrator.calibrate(
      0,
      [&](int64_t) {
        data::Batch b;
        s.calib_loader->start_epoch(0, next++ % s.batches);
        ASSERT_TRUE(s.calib_loader->next(b));
        step.accumulate(micro_batches(*s.model, {b}), "calibration");
      },
      [&] { s.optimizer->zero_grad(); }));
  const auto layers = static_cast<int64_t>(s.strategies.size());
  ASSERT_GT(layers, 1);
  std::vector<std::tuple<std::string, int64_t, int64_t>> expected = {
      {"batches", 1, 3}, {"batches", 2, 3}, {"batches", 3, 3}};
  for (int64_t k = 0; k <= layers; ++k) expected.emplace_back("layers", k, layers);
  EXPECT_EQ(heard, expected);
}

}  // namespace
}  // namespace lb::train
