// memory.budget bounds the whole step (parameters, gradients, optimizer state, activations):
// the config's two budgets; the planner's levers (the optimizer's state bits, the update in
// backward) measured and chosen where activations alone cannot make the step fit; every step
// of a run within the budget on small BERT, ViT and ResNet configs, a step over it stopped.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "lb/train/memory/memory_planner.h"
#include "lb/train/memory/memory_report.h"
#include "lb/train/trainer.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

using lb::testing::TempDir;
using lb::testing::quiet;

TEST(StepBudget, ConfigTakesOneOfTheTwoBudgets) {
  nlohmann::json j = lb::testing::tiny_bert_config(2);
  j["memory"] = {{"budget", "3MB"}};
  const Config step = Config::from_json(j, "tiny.json");
  ASSERT_TRUE(step.memory.budget);
  EXPECT_TRUE(step.memory.budget->whole_step());
  EXPECT_EQ(step.to_json()["memory"]["budget"], "3MB");
  j["memory"] = {{"activation_budget", "0.5x"}};
  const Config act = Config::from_json(j, "tiny.json");
  ASSERT_TRUE(act.memory.budget);
  EXPECT_FALSE(act.memory.budget->whole_step());
  EXPECT_EQ(act.to_json()["memory"]["activation_budget"], "0.5x");
  EXPECT_FALSE(act.to_json()["memory"].contains("budget"));
  j["memory"] = {{"budget", "3MB"}, {"activation_budget", "1MB"}};
  const std::string m = lb::testing::error_message([&] { Config::from_json(j, "tiny.json"); });
  EXPECT_NE(m.find("memory.budget and memory.activation_budget: give one"), std::string::npos) << m;
}

// The levers' bytes as measured for the config's own settings (f32 AdamW state, gradients
// kept to the end of backward), from a plan at a budget that leaves everything exact.
MemoryPlan roomy_plan(const Config& c) {
  return plan_memory(c, "", MemoryBudget::parse("1TiB", "b", BudgetScope::Step));
}

// Trains `c` under `plan` for its steps: the trainer stops a step over the budget, so a run
// that ends is a run whose every step fit; the metrics' whole-step peaks say so too.
void expect_run_within(const Config& c, const MemoryPlan& plan, const TempDir& tmp, const std::string& what) {
  const std::string file = tmp.sub(what + "_plan.json");
  std::ofstream(file) << plan.to_json().dump(2);
  TrainOptions o = quiet(tmp.sub(what + "_run"));
  o.memory_plan = file;
  const TrainResult r = train(c, o);
  EXPECT_EQ(r.steps, c.train.max_steps) << what;
  for (const auto& l : lb::testing::train_lines(tmp.sub(what + "_run")))
    EXPECT_LE(l["peak_bytes"].get<int64_t>(), plan.budget_bytes) << what << " " << l;
}

void expect_step_budget_kept(nlohmann::json j, const std::string& what, const TempDir& tmp) {
  j["train"]["log_every"] = 1;  // one metrics line per step: each line's peak is its step's
  j["train"]["eval_every"] = 0;
  const Config c = Config::from_json(j, what + ".json");
  const MemoryPlan roomy = roomy_plan(c);
  ASSERT_EQ(roomy.scope, BudgetScope::Step);
  EXPECT_EQ(roomy.levers, (StepLevers{32, false})) << what;  // exact where everything fits
  if (c.optimizer.type == "adamw")  // two f32 moments; SGD with momentum: one
    EXPECT_EQ(roomy.fixed.optimizer, 2 * roomy.fixed.parameters) << what;
  EXPECT_GT(roomy.fixed.gradients, 0) << what;
  // Halfway between the smallest reachable whole step and the least the f32 state with every
  // gradient kept needs (its parameters, gradients and moments and the leanest activations):
  // the planner must reach for the optimizer's levers, and the step still fits, measured.
  const int64_t act_floor =
      plan_memory(c, "", MemoryBudget::parse("1TiB", "b", BudgetScope::Activation)).smallest_reachable;
  const int64_t f32_floor = roomy.fixed.total() + act_floor;
  const int64_t budget = (roomy.smallest_reachable + f32_floor) / 2;
  ASSERT_LT(roomy.smallest_reachable, budget) << what;
  ASSERT_LT(budget, f32_floor) << what;
  const MemoryPlan tight = plan_memory(c, "", MemoryBudget::parse(std::to_string(budget), "b", BudgetScope::Step));
  EXPECT_LE(tight.measured_peak, budget) << what << "\n" << tight.table();
  EXPECT_TRUE(tight.levers.state_bits < 32 || tight.levers.in_backward) << what << "\n" << tight.table();
  EXPECT_LT(tight.fixed.total(), roomy.fixed.total()) << what;
  EXPECT_EQ(tight.activation_budget_bytes + tight.fixed.total() <= budget, true) << what;
  // The plan file carries the levers; a run under it applies them and keeps every step within.
  const MemoryPlan back = MemoryPlan::from_json(tight.to_json(), "memory_plan.json");
  EXPECT_EQ(back.to_json(), tight.to_json());
  const Config applied = apply_memory_plan(c, tight);
  EXPECT_EQ(applied.optimizer.state_bits, tight.levers.state_bits);
  EXPECT_EQ(applied.optimizer.in_backward, tight.levers.in_backward);
  expect_run_within(c, tight, tmp, what);
}

TEST(StepBudget, PlansFitTheWholeStepOfSmallBertVitAndResNet) {
  TempDir tmp("lb_step_budget");
  nlohmann::json bert = lb::testing::tiny_bert_config(3);
  expect_step_budget_kept(bert, "bert", tmp);
  lb::testing::write_image_folder(tmp.path() / "images");
  for (nlohmann::json j : {lb::testing::tiny_vit_config(tmp.sub("images"), 3),
                           lb::testing::tiny_resnet_config(tmp.sub("images"), 3)}) {
    j["data"]["workers"] = 0;  // prefetched batches would add to the peaks at random
    expect_step_budget_kept(j, j["model"]["type"], tmp);
  }
}

// Below what even the leanest optimizer settings hold: an error naming the parts.
TEST(StepBudget, BelowTheStateAloneIsAnErrorNamingIt) {
  nlohmann::json j = lb::testing::tiny_bert_config(2);
  const Config c = Config::from_json(j, "tiny.json");
  const std::string m = lb::testing::error_message(
      [&] { plan_memory(c, "", MemoryBudget::parse("1000", "b", BudgetScope::Step)); });
  EXPECT_NE(m.find("tiny.json: memory.budget 1000 (0.001 MB of whole step) is below what the step holds besides "
                   "activations with the leanest optimizer settings: "),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("MB of parameters, gradients and optimizer state. Raise the budget"), std::string::npos) << m;
}

// A run whose plan says less than its steps take stops at the first step over it, naming the
// whole step.
TEST(StepBudget, AStepOverTheWholeStepBudgetStopsTheRun) {
  TempDir tmp("lb_step_budget_over");
  nlohmann::json j = lb::testing::tiny_bert_config(3);
  const Config c = Config::from_json(j, "tiny.json");
  nlohmann::json p = roomy_plan(c).to_json();
  p["budget_bytes"] = 1000;
  p["step"]["fixed_bytes"]["gradients"] = 1;  // the category the message must name
  const std::string file = tmp.sub("plan.json");
  std::ofstream(file) << p.dump(2);
  TrainOptions o = quiet(tmp.sub("run"));
  o.memory_plan = file;
  const std::string m = lb::testing::error_message([&] { train(c, o); });
  EXPECT_NE(m.find("tiny.json: step 1 peaked at"), std::string::npos) << m;
  EXPECT_NE(m.find("(parameters, gradients, optimizer state and activations)"), std::string::npos) << m;
  EXPECT_NE(m.find("over memory.budget 1TiB"), std::string::npos) << m;
  EXPECT_NE(m.find("; over their planned share: gradients "), std::string::npos) << m;
  EXPECT_NE(m.find(" (planned 0.0 MB)"), std::string::npos) << m;
}

}  // namespace
}  // namespace lb::train
