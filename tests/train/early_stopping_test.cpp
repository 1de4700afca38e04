// Keeping the best: early stopping on the task's primary metric (train.early_stopping_patience)
// and `export` of a run taking its best checkpoint by default (--latest: its newest).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lb/train/export/hf_export.h"
#include "lb/train/trainer.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;
using lb::testing::TempDir;

// A run whose metric never improves after its first evaluation (a learning rate of 1e-20: every
// evaluation ties the first, and a tie is no new best), evaluated after every step.
nlohmann::json flat_run(int64_t steps, int64_t patience) {
  nlohmann::json j = lb::testing::tiny_bert_config(steps, /*dropout=*/0.0);
  j["optimizer"]["lr"] = 1e-20;
  j["train"]["eval_every"] = 1;
  j["train"]["early_stopping_patience"] = patience;
  return j;
}

std::vector<nlohmann::json> lines_of(const std::string& path, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) {
    const auto j = nlohmann::json::parse(l);
    if (j.value("type", "") == type) out.push_back(j);
  }
  return out;
}

TEST(EarlyStopping, StopsAfterPatienceEvaluationsWithoutANewBest) {
  TempDir tmp("lb_early_stop");
  const std::string run = tmp.sub("run");
  const TrainResult r = train(Config::from_json(flat_run(10, 2), "flat.json"), lb::testing::quiet(run));
  // Step 1's evaluation is the best; steps 2 and 3 do not beat it: stopped after step 3.
  EXPECT_EQ(r.steps, 3);
  EXPECT_FALSE(r.interrupted);
  EXPECT_FALSE(r.final_eval.empty());
  const auto results = nlohmann::json::parse(std::ifstream(run + "/eval_results.json"));
  EXPECT_EQ(results["stopped_early_at_step"], 3);
  EXPECT_EQ(fs::path(results["best_checkpoint"].get<std::string>()).filename(), "checkpoint-1");
  const auto stops = lines_of(run + "/metrics.jsonl", "early_stopping");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["best_step"], 1);
  EXPECT_NE(stops[0]["reason"].get<std::string>().find("train.early_stopping_patience"), std::string::npos);
  // A resume of a run that stopped early trains no further.
  TrainOptions again = lb::testing::quiet(run);
  again.resume = run;
  const TrainResult resumed = train(Config::from_json(flat_run(10, 2), "flat.json"), again);
  EXPECT_EQ(resumed.steps, 3);
  EXPECT_TRUE(resumed.losses.empty());

  // Patience 0 (the default) never stops early.
  const TrainResult full =
      train(Config::from_json(flat_run(4, 0), "flat.json"), lb::testing::quiet(tmp.sub("full")));
  EXPECT_EQ(full.steps, 4);
  const auto full_results = nlohmann::json::parse(std::ifstream(tmp.sub("full") + "/eval_results.json"));
  EXPECT_TRUE(full_results["stopped_early_at_step"].is_null());
}

TEST(EarlyStopping, ExportTakesTheBestCheckpointUnlessTheLatestIsAsked) {
  TempDir tmp("lb_export_best");
  const std::string run = tmp.sub("run");
  nlohmann::json j = flat_run(3, 0);
  j["train"]["keep_checkpoints"] = 1;  // checkpoint-3 (newest) and checkpoint-1 (best) kept
  train(Config::from_json(j, "flat.json"), lb::testing::quiet(run));
  ASSERT_TRUE(fs::exists(run + "/checkpoint-1") && fs::exists(run + "/checkpoint-3"));
  const ExportSummary best = export_checkpoint(run, tmp.path() / "best", ExportOptions{}, "--out");
  EXPECT_EQ(fs::path(best.checkpoint).filename(), "checkpoint-1");
  ExportOptions latest;
  latest.latest = true;
  const ExportSummary newest = export_checkpoint(run, tmp.path() / "newest", latest, "--out");
  EXPECT_EQ(fs::path(newest.checkpoint).filename(), "checkpoint-3");
  // A checkpoint named directly is that checkpoint.
  EXPECT_EQ(find_best_checkpoint(run + "/checkpoint-3", "export"), run + "/checkpoint-3");
}

}  // namespace
}  // namespace lb::train
