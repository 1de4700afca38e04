// Memory plans in use: a saved plan serves runs of its inputs only; shorter batches and
// batches of fewer tokens run plans of their own, each step the one that covers it; a batch
// no plan fits is split into micro-batches (ResNet: batch norm sees them, and says so); the
// profiled step accumulates as the trainer runs it. The planner itself: memory_planner_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include "lb/core/error.h"
#include "lb/io/json_file.h"
#include "lb/train/memory/memory_planner.h"
#include "lb/train/memory/memory_report.h"
#include "lb/train/trainer.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;
using lb::testing::TempDir;
using lb::testing::quiet;
using lb::testing::train_lines;

TEST(MemoryPlanner, ASavedPlanServesRunsOfItsInputsOnly) {
  TempDir tmp("lb_planner");
  nlohmann::json j = lb::testing::tiny_bert_config(4);
  j["train"]["log_every"] = 1;
  j["memory"] = {{"fidelity_weight", 1e9}};
  nlohmann::json budgeted = j;
  budgeted["memory"]["activation_budget"] = "0.75x";
  const Config with_budget = Config::from_json(budgeted, "tiny.json");
  const MemoryPlan plan = plan_memory(with_budget, "", *with_budget.memory.budget);
  ASSERT_TRUE(plan.profiled_on.is_object());
  nlohmann::json saved = plan.to_json();
  saved["profile_s"] = 12345.0;  // a marker: a plan made again would not carry it
  const std::string file = tmp.sub("plan.json");
  std::ofstream(file) << saved.dump(2);

  // No budget in the config: the plan's is the run's; another seed; nothing planned again.
  j["train"]["seed"] = 7;
  TrainOptions o = quiet(tmp.sub("run"));
  o.memory_plan = file;
  const TrainResult r = train(Config::from_json(j, "tiny.json"), o);
  EXPECT_EQ(r.steps, 4);
  const nlohmann::json used = io::read_json_file(tmp.sub("run") + "/memory_plan.json");
  EXPECT_EQ(used, saved);
  EXPECT_EQ(io::read_json_file(tmp.sub("run") + "/config.json")["memory"]["activation_budget"], "0.75x");
  for (const auto& l : train_lines(tmp.sub("run")))
    EXPECT_LE(l["activation_peak_bytes"].get<int64_t>(), plan.budget_bytes) << l;
  // The same budget given as well: the same.
  o.out_dir = tmp.sub("run2");
  EXPECT_EQ(train(Config::from_json(budgeted, "tiny.json"), o).steps, 4);

  // Another batch, another strategy, another budget, a plan without its inputs: errors.
  nlohmann::json other = j;
  other["data"]["batch_size"] = 4;
  o.out_dir = tmp.sub("bad");
  std::string m = lb::testing::error_message([&] { train(Config::from_json(other, "tiny.json"), o); });
  EXPECT_NE(m.find(file + ": planned for data.batch_size 8, this run has 4; make one for this run: leanback plan "
                   "tiny.json --activation-budget 0.75x --json > FILE"),
            std::string::npos)
      << m;
  TrainOptions hot = o;
  hot.strategy = "hot";
  m = lb::testing::error_message([&] { train(Config::from_json(j, "tiny.json"), hot); });
  EXPECT_NE(m.find(file + ": planned for strategy \"\", this run has \"hot\""), std::string::npos) << m;
  // Codecs or recomputation set by the config (or --set) are not dropped for the plan's.
  for (const char* key : {"codecs", "recompute"}) {
    other = j;
    other["memory"][key] = std::string(key) == "codecs" ? nlohmann::json::array({{{"codec", "int8"}}})
                                                        : nlohmann::json::array({"*"});
    m = lb::testing::error_message([&] { train(Config::from_json(other, "tiny.json"), o); });
    EXPECT_NE(m.find(file + ": --memory-plan carries its own codecs and recomputation, and tiny.json sets memory." +
                     key),
              std::string::npos)
        << m;
  }
  other = budgeted;
  other["memory"]["activation_budget"] = "0.8x";
  m = lb::testing::error_message([&] { train(Config::from_json(other, "tiny.json"), o); });
  EXPECT_NE(m.find(file + ": planned for memory.activation_budget 0.75x, this run asks for memory.activation_budget 0.8x"), std::string::npos) << m;
  saved.erase("profiled_on");
  std::ofstream(file) << saved.dump(2);
  m = lb::testing::error_message([&] { train(Config::from_json(j, "tiny.json"), o); });
  EXPECT_NE(m.find(file + ": records no inputs it was planned for"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(tmp.sub("bad")));  // nothing written for a run that could not start
  o.memory_plan = tmp.sub("missing.json");
  m = lb::testing::error_message([&] { train(Config::from_json(j, "tiny.json"), o); });
  EXPECT_NE(m.find(tmp.sub("missing.json") + ": no such file"), std::string::npos) << m;
}

// `j` trained as it is (tmp/plain) and at the budget 0.6x (tmp/run), fidelity weighed so that
// the plan recomputes rather than compress; every step logged.
struct PlainAndPlanned {
  TrainResult plain, planned;
  Config config;
};
PlainAndPlanned plain_and_planned(const TempDir& tmp, nlohmann::json j) {
  j["train"]["log_every"] = 1;
  PlainAndPlanned out;
  out.plain = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("plain")));
  // 0.602 MB: a budget at which recomputing block 0 (lossless) fits the full-length
  // batch, so that plan recomputes and shorter batches need less. (It was 0.63x while the
  // recomputed block's input gradient counted as a model gradient during the block's backward;
  // counted as activation memory, recomputation peaks higher and 0.63x-0.75x plan codecs.)
  j["memory"] = {{"activation_budget", "0.8x"}, {"fidelity_weight", 1e9}};
  out.config = Config::from_json(j, "tiny.json");
  out.planned = train(out.config, quiet(tmp.sub("run")));
  return out;
}

// A run of 8 steps with plans per batch shape: some steps ran under a plan whose label holds
// `label_part` ("": any but the longest batch's), every step within the budget, the losses
// those of the unplanned run (recomputation only); plan.txt shows `table_has`, and the saved
// plan reads back the same.
void expect_ran_plans_like(const TrainResult& r, const TrainResult& plain, const MemoryPlan& plan,
                           const std::string& dir, const std::string& label_part, const std::string& table_has) {
  int64_t steps = 0, matching = 0;
  for (const auto& [label, n] : r.memory_plan_steps.items()) {
    steps += n.get<int64_t>();
    if (label != "longest" && label.find(label_part) != std::string::npos) matching += n.get<int64_t>();
  }
  EXPECT_EQ(steps, 8) << r.memory_plan_steps.dump();
  EXPECT_GT(matching, 0) << r.memory_plan_steps.dump();
  for (const auto& l : train_lines(dir)) EXPECT_LE(l["activation_peak_bytes"].get<int64_t>(), plan.budget_bytes) << l;
  ASSERT_EQ(r.losses.size(), plain.losses.size());
  for (size_t i = 0; i < r.losses.size(); ++i) EXPECT_EQ(r.losses[i], plain.losses[i]) << "step " << i + 1;
  std::ifstream txt(dir + "/plan.txt");
  const std::string table((std::istreambuf_iterator<char>(txt)), std::istreambuf_iterator<char>());
  EXPECT_NE(table.find(table_has), std::string::npos) << table;
  EXPECT_EQ(MemoryPlan::from_json(plan.to_json(), "again").to_json(), plan.to_json());
}

// Shorter batches get plans of their own (profiled at batch size x N), each within the
// budget; a run with dynamic padding switches between them by its batches' longest sequence,
// every step within the budget, and trains as the unplanned run does (recomputation only).
TEST(MemoryPlanner, ShorterBatchesRunPlansOfTheirOwn) {
  TempDir tmp("lb_planner");
  nlohmann::json j = lb::testing::tiny_bert_config(8);
  j["data"]["padding"] = "dynamic";
  const auto [plain, r, c] = plain_and_planned(tmp, j);
  const MemoryPlan plan = MemoryPlan::from_json(r.memory_plan, "plan");
  ASSERT_FALSE(plan.section.recompute.empty()) << r.memory_plan.dump();
  ASSERT_FALSE(plan.by_length.empty()) << r.memory_plan.dump();
  int64_t longer = c.data.max_seq_len;
  int last_by_length = -1;
  for (size_t i = 0; i < plan.by_length.size(); ++i) {
    const LengthPlan& l = plan.by_length[i];
    EXPECT_LE(l.measured_peak, plan.budget_bytes) << l.label();
    EXPECT_LE(l.section.recompute.size(), plan.section.recompute.size()) << l.label();
    if (l.max_tokens > 0) continue;  // by real tokens: BatchesOfFewerTokensRunPlansOfTheirOwn
    EXPECT_LT(l.max_len, longer);
    longer = l.max_len;
    last_by_length = static_cast<int>(i);
  }
  ASSERT_GE(last_by_length, 0) << r.memory_plan.dump();
  EXPECT_EQ(plan.length_plan_for(c.data.max_seq_len), -1);
  EXPECT_EQ(plan.length_plan_for(plan.by_length[static_cast<size_t>(last_by_length)].max_len), last_by_length);
  EXPECT_EQ(plan.length_plan_for(1), last_by_length);
  expect_ran_plans_like(r, plain, plan, tmp.sub("run"), "", "shorter batches");
}

// Where padding is skipped, a batch of full-length rows with fewer real tokens keeps less
// (token-wise layers see only its tokens): plans by real tokens, profiled at the full batch
// with that many kept, serve them. Every batch here is padded to max_seq_len, so the plans by
// longest sequence never apply; the run steps under plans by tokens, within the budget, and
// trains as the unplanned run does.
TEST(MemoryPlanner, BatchesOfFewerTokensRunPlansOfTheirOwn) {
  TempDir tmp("lb_planner");
  nlohmann::json j = lb::testing::tiny_bert_config(8);
  j["data"]["padding"] = "max_length";
  j["model"]["skip_padding"] = true;
  const auto [plain, r, c] = plain_and_planned(tmp, j);
  const MemoryPlan plan = MemoryPlan::from_json(r.memory_plan, "plan");
  ASSERT_FALSE(plan.section.recompute.empty()) << r.memory_plan.dump();
  int64_t more = c.data.batch_size * c.data.max_seq_len;
  int by_tokens = 0;
  for (const auto& l : plan.by_length) {
    if (l.max_tokens == 0) continue;
    ++by_tokens;
    EXPECT_EQ(l.max_len, c.data.max_seq_len);
    EXPECT_LT(l.max_tokens, more);
    more = l.max_tokens;
    EXPECT_LE(l.measured_peak, plan.budget_bytes) << l.label();
  }
  ASSERT_GT(by_tokens, 0) << r.memory_plan.dump();
  expect_ran_plans_like(r, plain, plan, tmp.sub("run"), "real tokens",
                        "T = " + std::to_string(plan.by_length.back().max_tokens));
}

// A data set smaller than one batch: the profiles by real tokens take what its one batch has
// (no error for asking more tokens than it holds), and the run keeps to the budget.
TEST(MemoryPlanner, PlansADataSetSmallerThanABatch) {
  TempDir tmp("lb_planner");
  nlohmann::json j = lb::testing::tiny_bert_config(2);
  j["data"]["synthetic_train"] = 5;
  j["data"]["padding"] = "max_length";
  j["train"]["log_every"] = 1;
  j["memory"] = {{"activation_budget", "0.6x"}, {"fidelity_weight", 1e9}};
  const TrainResult r = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("run")));
  const MemoryPlan plan = MemoryPlan::from_json(r.memory_plan, "plan");
  for (const auto& l : train_lines(tmp.sub("run")))
    EXPECT_LE(l["activation_peak_bytes"].get<int64_t>(), plan.budget_bytes) << l;
}

// Ctrl-C or SIGTERM while the planner profiles (minutes on a CPU) stops it before the next
// profiling step: an error that says so, and no run directory.
TEST(MemoryPlanner, StopsWhenAskedWhilePlanning) {
  TempDir tmp("lb_planner");
  nlohmann::json j = lb::testing::tiny_bert_config(4);
  j["memory"] = {{"activation_budget", "0.6x"}};
  struct Asked {  // the flag a signal sets, cleared again whatever happens
    Asked() { stop_requested() = true; }
    ~Asked() { stop_requested() = false; }
  };
  {
    const Asked asked;
    EXPECT_THROW(train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("run"))), PlanInterrupted);
    const std::string m =
        lb::testing::error_message([&] { train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("run"))); });
    EXPECT_NE(m.find("tiny.json: memory.activation_budget: interrupted while planning; nothing was written"), std::string::npos)
        << m;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp.sub("run")));
}

// Which plan a batch runs: the covering plan of the shortest length or of the fewest real
// tokens, of the two the one predicted faster; a batch neither covers runs the longest plan.
TEST(MemoryPlanner, PicksThePlanThatCoversABatch) {
  MemoryPlan plan;
  const auto add = [&](int64_t len, int64_t tokens, double ms) {
    LengthPlan l;
    l.max_len = len;
    l.max_tokens = tokens;
    l.predicted_step_ms = ms;  // no exact_step_ms: a plan from before it, compared by time
    plan.by_length.push_back(l);
  };
  add(96, 0, 60);     // 0
  add(64, 0, 35);     // 1
  add(128, 3072, 70); // 2
  add(128, 2048, 45); // 3
  EXPECT_EQ(plan.length_plan_for(128, 4096), -1);  // nothing covers it
  EXPECT_EQ(plan.length_plan_for(128, 0), -1);     // tokens not known: length plans only
  EXPECT_EQ(plan.length_plan_for(128, 3000), 2);
  EXPECT_EQ(plan.length_plan_for(128, 2048), 3);
  EXPECT_EQ(plan.length_plan_for(96, 2900), 0);    // 60 ms against 70
  EXPECT_EQ(plan.length_plan_for(96, 2000), 3);    // 45 against 60
  EXPECT_EQ(plan.length_plan_for(64, 2000), 1);    // 35 against 45
  EXPECT_EQ(plan.length_plan_for(1, 0), 1);

  // With each profile's exact step known: the smaller share added to it wins. STS-B at
  // 115.2MB: N = 64 adds 25% to its 32 x 64 profile (1 block recomputed), T = 1024 adds 35%
  // to its 32 x 128 one (2 recomputed) though its predicted time is lower.
  MemoryPlan stsb;
  for (auto [len, tokens, ms, exact] : {std::tuple<int64_t, int64_t, double, double>{64, 0, 2375, 1900},
                                        {128, 1024, 2026, 1500}, {128, 2048, 3406, 2100}}) {
    LengthPlan l;
    l.max_len = len;
    l.max_tokens = tokens;
    l.predicted_step_ms = ms;
    l.exact_step_ms = exact;
    stsb.by_length.push_back(l);
  }
  EXPECT_EQ(stsb.length_plan_for(50, 900), 0);
  EXPECT_EQ(stsb.length_plan_for(100, 900), 1);  // no length plan covers it
  stsb.by_length[1].predicted_step_ms = 1800;    // adds 20%
  EXPECT_EQ(stsb.length_plan_for(50, 900), 1);
  // The JSON keeps it; a plan without it reads back as 0 (compared by time).
  stsb.budget_bytes = 1;  // a plan file holds at least 1 byte
  nlohmann::json j = stsb.to_json();
  EXPECT_EQ(MemoryPlan::from_json(j, "plan").by_length[0].exact_step_ms, 1900);
  j["by_length"][0].erase("exact_step_ms");
  EXPECT_EQ(MemoryPlan::from_json(j, "plan").by_length[0].exact_step_ms, 0);
}

// The number of micro-batches tried next: a divisor of the batch, at least the failed count
// scaled by how far its reach overshot the budget, so a large batch is not profiled divisor by
// divisor.
TEST(MemoryPlanner, NextMicroBatchCountSkipsDivisorsTheLastReachRulesOut) {
  EXPECT_EQ(next_micro_batches(128, 1, 150, 100), 2);   // 1.5x over: 2
  EXPECT_EQ(next_micro_batches(128, 1, 300, 100), 4);   // 3x over: 3 does not divide 128, 4
  EXPECT_EQ(next_micro_batches(128, 2, 400, 100), 8);   // halves at 4x the budget: 8 of 128
  EXPECT_EQ(next_micro_batches(128, 4, 101, 100), 8);   // just over: the next divisor
  EXPECT_EQ(next_micro_batches(12, 4, 200, 100), 12);   // 8 does not divide 12: the batch
  EXPECT_EQ(next_micro_batches(128, 1, 1ll << 50, 1), 128);  // far out of reach: one example each
  EXPECT_EQ(next_micro_batches(128, 128, 200, 100), 0);      // nothing left to try
  EXPECT_EQ(next_micro_batches(6, 1, 100, 100), 2);    // at most the budget already: the next one
}

// A budget no plan of the batch reaches: the planner splits the batch into micro-batches
// whose gradients accumulate. Between the exact peak of half a batch and the smallest
// reachable of a whole one, two micro-batches, planned with exact choices only (recomputation
// at most): the run trains as the unsplit one does
// (dropout off; the same examples per step, sums in another order), every step within the
// budget; the plan reads back and serves a run of the same config only where micro-batches
// are allowed. Below what one example reaches: an error naming that.
TEST(MemoryPlanner, SplitsABatchNoPlanFitsIntoMicroBatches) {
  TempDir tmp("lb_planner_micro");
  nlohmann::json j = lb::testing::tiny_bert_config(4, /*dropout=*/0.0);
  j["train"]["log_every"] = 1;
  const Config c = Config::from_json(j, "tiny.json");
  const MemoryPlan whole = plan_memory(c, "", MemoryBudget::parse("1.0x", "b", BudgetScope::Activation));
  Config half = c;
  half.data.batch_size /= 2;
  const int64_t half_exact = memory_report(half, "").activation_peak_bytes;
  ASSERT_LT(half_exact, whole.smallest_reachable);
  const int64_t budget = (half_exact + whole.smallest_reachable) / 2;
  j["memory"] = {{"activation_budget", std::to_string(budget)}, {"fidelity_weight", 1e9}};  // exact choices only
  const Config budgeted = Config::from_json(j, "tiny.json");
  const MemoryPlan plan = plan_memory(budgeted, "", *budgeted.memory.budget);
  EXPECT_EQ(plan.micro_batches, 2);
  EXPECT_EQ(plan.batch_smallest_reachable, whole.smallest_reachable);
  EXPECT_EQ(plan.budget_bytes, budget);
  EXPECT_LE(plan.measured_peak, budget);
  for (const auto& part : plan.parts) EXPECT_EQ(part.fidelity, 0) << part.part << " " << part.option.name();
  EXPECT_NE(plan.table().find("micro-batches: 2 per batch, gradients accumulated"), std::string::npos) << plan.table();
  EXPECT_EQ(plan.table().find("BatchNorm"), std::string::npos) << plan.table();  // no BatchNorm in BERT
  const Config applied = apply_memory_plan(budgeted, plan);
  EXPECT_EQ(applied.data.batch_size, 4);
  EXPECT_EQ(applied.train.grad_accum, 2);
  EXPECT_EQ(MemoryPlan::from_json(plan.to_json(), "again").to_json(), plan.to_json());

  const TrainResult plain = train(c, quiet(tmp.sub("plain")));
  const TrainResult split = train(budgeted, quiet(tmp.sub("split")));
  ASSERT_EQ(split.losses.size(), plain.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i)
    EXPECT_NEAR(split.losses[i], plain.losses[i], 1e-5 * std::abs(plain.losses[i])) << "step " << i + 1;
  for (const auto& l : train_lines(tmp.sub("split"))) EXPECT_LE(l["activation_peak_bytes"].get<int64_t>(), budget) << l;
  EXPECT_EQ(io::read_json_file(tmp.sub("split") + "/memory_plan.json")["micro_batches"], 2);

  // The saved plan serves another seed; a config that forbids micro-batches refuses it.
  TrainOptions o = quiet(tmp.sub("again"));
  o.memory_plan = tmp.sub("split") + "/memory_plan.json";
  o.seed = 8;
  EXPECT_EQ(train(c, o).steps, 4);
  nlohmann::json no_split = j;
  no_split["memory"]["micro_batches"] = false;
  o.out_dir = tmp.sub("refused");
  std::string m = lb::testing::error_message([&] { train(Config::from_json(no_split, "tiny.json"), o); });
  EXPECT_NE(m.find("memory_plan.json: splits each batch into 2 micro-batches, and this run sets "
                   "memory.micro_batches to false"),
            std::string::npos)
      << m;
  // Below what micro-batches of one example reach.
  m = lb::testing::error_message([&] { plan_memory(c, "", MemoryBudget::parse("1000", "b", BudgetScope::Activation)); });
  EXPECT_NE(m.find("tiny.json: memory.activation_budget 1000 (0.001 MB of activation peak) is below the smallest reachable "
                   "even in micro-batches of one example"),
            std::string::npos)
      << m;
}

// A tiny ResNet's config on an image folder written into `tmp`, every step logged; no
// background loader (its prefetched batches would add to the measured peaks at random).
nlohmann::json planner_resnet_config(const TempDir& tmp, int64_t steps) {
  lb::testing::write_image_folder(tmp.path() / "images");
  nlohmann::json j = lb::testing::tiny_resnet_config(tmp.sub("images"), steps);
  j["data"]["workers"] = 0;
  j["train"]["log_every"] = 1;
  return j;
}

// ResNet: its BatchNorm sees each micro-batch apart, and plan.txt says so; the run keeps to
// the budget.
TEST(MemoryPlanner, SplitsAResNetBatchAndSaysBatchNormSeesMicroBatches) {
  TempDir tmp("lb_planner_micro_resnet");
  nlohmann::json j = planner_resnet_config(tmp, 2);
  const MemoryPlan whole = plan_memory(Config::from_json(j, "resnet.json"), "", MemoryBudget::parse("1.0x", "b", BudgetScope::Activation));
  const int64_t budget = whole.smallest_reachable * 3 / 4;
  j["memory"] = {{"activation_budget", std::to_string(budget)}};
  const Config budgeted = Config::from_json(j, "resnet.json");
  const TrainResult r = train(budgeted, quiet(tmp.sub("run")));
  EXPECT_EQ(r.steps, 2);
  const nlohmann::json plan = io::read_json_file(tmp.sub("run") + "/memory_plan.json");
  EXPECT_GE(plan["micro_batches"].get<int64_t>(), 2) << plan.dump();
  for (const auto& l : train_lines(tmp.sub("run"))) EXPECT_LE(l["activation_peak_bytes"].get<int64_t>(), budget) << l;
  std::ifstream txt(tmp.sub("run") + "/plan.txt");
  const std::string table((std::istreambuf_iterator<char>(txt)), std::istreambuf_iterator<char>());
  EXPECT_NE(table.find("BatchNorm normalises each micro-batch on its own"), std::string::npos) << table;
}

// An accumulating step (train.grad_accum = k > 1, as a plan with micro-batches runs) is
// profiled as the trainer runs its first: k micro-batches loaded before the step, their
// inputs live throughout. So no training step peaks above the profile (a plan for a tenth of
// ResNet-18's bytes in 16 micro-batches of 8 overran by those 15 batches, 1.5 MB).
TEST(MemoryPlanner, ProfilesAnAccumulatingStepAsTheTrainerRunsIt) {
  TempDir tmp("lb_planner_accum");
  nlohmann::json j = planner_resnet_config(tmp, 3);
  j["data"]["batch_size"] = 2;
  const int64_t single = memory_report(Config::from_json(j, "resnet.json"), "").activation_peak_bytes;
  j["train"]["grad_accum"] = 4;
  const Config accumulating = Config::from_json(j, "resnet.json");
  const int64_t profiled = memory_report(accumulating, "").activation_peak_bytes;
  EXPECT_GE(profiled, single + 3 * 2 * 3 * 8 * 8 * 4) << single;  // 3 more batches of 2 RGB 8x8 images
  train(accumulating, quiet(tmp.sub("run")));
  for (const auto& l : train_lines(tmp.sub("run"))) EXPECT_LE(l["activation_peak_bytes"].get<int64_t>(), profiled) << l;
}

}  // namespace
}  // namespace lb::train
