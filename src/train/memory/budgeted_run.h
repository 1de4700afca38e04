// Internal: a run's memory budget from decision to report, in one place. The plan is a
// `--memory-plan` file, the resumed run's own memory_plan.json, or made now by the planner
// (memory_planner.h) under memory.budget; under data-parallel rank 0 decides and every rank
// carries out its plan (plans made apart could differ: they rest on measured step times).
// During training it puts in force the plan for each step's batch length, watches where each
// step's activation peak is set, and stops a step over the budget naming that place.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/autograd/peak_watch.h"
#include "lb/autograd/saved_codec.h"
#include "lb/data/batch.h"
#include "lb/dist/process_group.h"
#include "lb/nn/module.h"
#include "lb/train/config.h"
#include "lb/train/memory/memory_planner.h"
#include "lb/train/run/metrics_log.h"
#include "lb/train/run/progress.h"
#include "lb/train/train_step.h"
#include "lb/train/trainer.h"
#include "src/train/memory/batch_length_plans.h"

namespace lb::train {

class BudgetedRun {
 public:
  // Decides the plan (none without a budget) for the `requested` config. `resuming`: whether
  // `run_dir` holds the run being resumed. Throws on a plan that does not fit the run (another
  // budget, another plan on resume, explicit memory settings with it).
  BudgetedRun(const Config& requested, const TrainOptions& opt, const std::filesystem::path& run_dir, bool resuming,
              dist::ProcessGroup& pg);

  // The requested config under the plan: the budget a resumed planned run carries, the plan's
  // micro-batches, codecs, recomputation and backward rules (the requested one without a plan).
  const Config& config() const { return config_; }

  bool active() const { return plan_.has_value(); }
  // For the run directory: plan.txt's memory part ("" without a plan) and memory_plan.json (null).
  std::string table() const { return plan_ ? "\n" + plan_->table() : ""; }
  nlohmann::json json() const { return plan_ ? plan_->to_json() : nlohmann::json(nullptr); }

  // Once the TrainStep exists (built with the longest batch's `codecs`): plans per batch
  // length take turns on it and on the model's blocks.
  void attach(nn::Module& module, TrainStep& step, std::shared_ptr<const autograd::CodecRules> codecs);
  // For a calibration pass on its own batches: their length's plan, no step counted.
  void put_in_force_for(const std::vector<data::Batch>& micro);
  // Around one optimizer step: its plan in force and the peak watched, then the peak checked
  // against the budget (an Error naming where it was set, the planned peak and `last_good`).
  void begin_step(const std::vector<data::Batch>& micro, const Device& device);
  void end_step(int64_t step, const StepResult& result, const std::string& source, const std::string& last_good);
  // After the loop: the steps run under each length's plan (log line, metrics line, result).
  void report(const Logger& log, MetricsLog& metrics, TrainResult& result) const;

 private:
  Config config_;
  std::optional<MemoryPlan> plan_;
  std::optional<BatchLengthPlans> lengths_;
  std::optional<autograd::PeakWatch> watch_;
  const Allocator* allocator_ = nullptr;  // the step's device's, from begin_step
  int length_plan_ = -1;
};

}  // namespace lb::train
