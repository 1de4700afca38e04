// BudgetedRun (see budgeted_run.h).
#include "src/train/memory/budgeted_run.h"

#include <iostream>
#include <utility>

#include "lb/core/error.h"
#include "lb/io/json_file.h"
#include "lb/train/memory/memory_budget.h"

namespace lb::train {

namespace fs = std::filesystem;

namespace {
// Resuming a run that was planned (`saved`, its memory_plan.json): the plan is part of the
// run, so the rest of it runs under the same plan whether or not the budget is given again
// (`config.memory.budget` is set from it). Another plan (`given_plan`, read from
// `given_file`) or explicit memory settings in its place would make it another run: refused.
// Every rank calls it, as every rank reads the checkpoint; `say` prints the notes.
void keep_the_runs_plan(Config& config, const std::optional<MemoryPlan>& given_plan, const std::string& given_file,
                        const fs::path& saved, bool say) {
  const MemoryPlan runs = MemoryPlan::from_json(io::read_json_file(saved.string()), saved.string());
  if (given_plan) {
    LB_CHECK(given_plan->to_json() == runs.to_json(), "--memory-plan ", given_file, ": the run being resumed has its "
             "own memory plan (", saved.string(), ") and this one differs; resume without --memory-plan to go on "
             "under the run's plan, or start a new run with this one");
    if (say) std::cerr << "resume: --memory-plan " << given_file << " is the run's own plan\n";
    return;
  }
  if (config.memory.budget) return;  // the same budget goes on (the trainer refuses another)
  LB_CHECK(config.memory.planned_settings_given().empty(), config.source, " sets ",
           config.memory.planned_settings_given(), " (in the file or by --set), but the run being resumed was planned "
           "for memory budget ", runs.budget_text, " (", saved.string(), "); resume without them to go on under "
           "the run's plan, or start a new run");
  config.memory.budget = MemoryBudget::parse(runs.budget_text, saved.string(), runs.scope);
  if (say)
    std::cerr << "resume: the run goes on under its memory plan for budget " << runs.budget_text << " ("
              << saved.string() << ")\n";
}
}  // namespace

BudgetedRun::BudgetedRun(const Config& requested, const TrainOptions& opt, const fs::path& run_dir, bool resuming,
                         dist::ProcessGroup& pg)
    : config_(requested) {
  Config& config = config_;
  std::optional<MemoryPlan> given;
  if (!opt.memory_plan.empty()) {  // every rank reads it: the same file, the same errors
    LB_CHECK(config.memory.planned_settings_given().empty(), opt.memory_plan, ": --memory-plan carries its own "
             "codecs and recomputation, and ", config.source, " sets ", config.memory.planned_settings_given(),
             " (in the file or by --set); give the plan or those, not both");
    given = load_memory_plan(opt.memory_plan, config, opt.strategy);
    if (!config.memory.budget)
      config.memory.budget = MemoryBudget::parse(given->budget_text, opt.memory_plan, given->scope);
  }
  const fs::path saved = run_dir / "memory_plan.json";
  const bool runs_own = resuming && fs::exists(saved);
  if (runs_own) keep_the_runs_plan(config, given, opt.memory_plan, saved, pg.is_main() && !opt.quiet);
  if (!config.memory.budget) return;
  std::string plan_text;
  if (pg.is_main()) {
    if (runs_own) {
      plan_ = MemoryPlan::from_json(io::read_json_file(saved.string()), saved.string());
      LB_CHECK(plan_->budget_text == config.memory.budget->text && plan_->scope == config.memory.budget->scope,
               config.source, ": ", config.memory.budget->key(), " is ", config.memory.budget->text,
               " but the run being resumed was planned for ",
               plan_->scope == BudgetScope::Step ? "memory.budget " : "memory.activation_budget ", plan_->budget_text,
               " (", saved.string(), "); resume with the same budget, or start a new run");
    } else if (given) {
      plan_ = std::move(given);
    } else {
      // Ctrl-C while planning (minutes on a CPU) stops it: nothing has been written yet.
      plan_ = plan_memory(config, opt.strategy, *config.memory.budget, /*shorter_batches=*/true,
                          [] { return stop_requested().load(); }, /*quiet=*/opt.quiet,
                          /*data_parallel=*/pg.size() > 1);
    }
    if (pg.size() > 1) plan_text = plan_->to_json().dump();
  }
  if (pg.size() > 1) {
    pg.broadcast(plan_text, 0, "memory plan");
    if (!pg.is_main()) plan_ = MemoryPlan::from_json(nlohmann::json::parse(plan_text), "rank 0's memory plan");
  }
  config = apply_memory_plan(config, *plan_);
}

void BudgetedRun::attach(nn::Module& module, TrainStep& step, std::shared_ptr<const autograd::CodecRules> codecs) {
  if (plan_ && !plan_->by_length.empty()) lengths_.emplace(*plan_, module, step, std::move(codecs));
}

void BudgetedRun::put_in_force_for(const std::vector<data::Batch>& micro) {
  if (lengths_) lengths_->put_in_force_for(micro);
}

void BudgetedRun::begin_step(const std::vector<data::Batch>& micro, const Device& device) {
  length_plan_ = lengths_ ? lengths_->apply(micro) : -1;
  allocator_ = &allocator_for(device);
  if (plan_) watch_.emplace(allocator_for(device), /*with_kept=*/false);
}

void BudgetedRun::end_step(int64_t step, const StepResult& r, const std::string& source, const std::string& last_good) {
  const bool whole = plan_ && plan_->scope == BudgetScope::Step;
  const int64_t peak = whole ? r.step_peak_bytes : r.activation_peak_bytes;
  if (plan_ && peak > plan_->budget_bytes) {
    watch_->check("after the backward");
    const auto& site = watch_->site();
    const std::string planned =
        length_plan_ < 0 ? megabytes(plan_->measured_peak) : [&] {
          const LengthPlan& l = plan_->by_length[static_cast<size_t>(length_plan_)];
          // Under memory.budget a shorter batch's plan bounds its activations, beside what the
          // step holds besides them.
          const int64_t peak = l.measured_peak > 0 ? l.measured_peak : l.predicted_peak;  // exact: predicted
          return megabytes(peak + (whole ? plan_->fixed.total() : 0)) + " for batches of " + l.batches();
        }();
    // The whole step: each category's own peak (since the last log line: at least this step's)
    // against its share of the plan; one at least is over, as the shares sum to the budget.
    std::string over;
    if (whole && allocator_ != nullptr) {
      const MemStats m = allocator_->stats();
      const auto tag = [&](MemTag t) { return m.peak[static_cast<int>(t)]; };
      const FixedBytes& f = plan_->fixed;
      const struct {
        const char* name;
        int64_t measured, planned;
      } shares[] = {{"parameters and buffers", tag(MemTag::Parameter) + tag(MemTag::Buffer), f.parameters + f.buffers},
                    {"gradients", tag(MemTag::Gradient), f.gradients},
                    {"optimizer state", tag(MemTag::Optimizer), f.optimizer},
                    {"activations", r.activation_peak_bytes, plan_->activation_budget_bytes}};
      for (const auto& c : shares)
        if (c.measured > c.planned)
          over += (over.empty() ? "; over their planned share: " : ", ") + std::string(c.name) + " " +
                  megabytes(c.measured) + " (planned " + megabytes(c.planned) + ")";
    }
    throw Error(source + ": step " + std::to_string(step + 1) + " peaked at " + megabytes(peak) +
                (whole ? " (parameters, gradients, optimizer state and activations), "
                       : " of activations, ") +
                megabytes(peak - plan_->budget_bytes) + " over " +
                (whole ? "memory.budget " : "memory.activation_budget ") +
                plan_->budget_text + " (" + megabytes(plan_->budget_bytes) + "; planned peak " + planned + ")" +
                (site ? ", set in " + site->phase + (site->op.empty() ? "" : " of " + site->op + " in " +
                                                     (site->module.empty() ? "(model)" : site->module))
                      : std::string()) +
                over + ": the plan (memory_plan.json) underestimated that part; plan again with a lower budget" +
                last_good);
  }
  watch_.reset();
}

void BudgetedRun::report(const Logger& log, MetricsLog& metrics, TrainResult& result) const {
  if (plan_) result.memory_plan = plan_->to_json();
  if (!lengths_) return;
  std::string counts;
  for (const auto& [label, n] : lengths_->steps()) {
    result.memory_plan_steps[label] = n;
    counts += (counts.empty() ? "" : ", ") +
              (label == "longest" ? std::string("the longest batches' plan")
                                  : "at most " + label + (label.find(' ') == std::string::npos ? " tokens" : "")) +
              ": " + std::to_string(n);
  }
  log.info("steps by memory plan (batch length): " + counts);
  metrics.write({{"type", "memory_plan_steps"}, {"steps", result.memory_plan_steps}});
}

}  // namespace lb::train
