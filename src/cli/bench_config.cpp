// `leanback bench CONFIG.json [--memory-budget SIZE] [--strategy S] [--set k=v]...`: the
// training step of a config's model, timed on the batch the memory planner profiles (the
// config's first batch; text at its largest, as memory_planner.h's worst_case_batch), with
// the config's strategies, codecs and recomputation, or with the plan for a budget. Prints
// the step's phases (medians of --iters steps after --warmup), its activation peak and, with a
// budget, the plan's predicted and measured peaks; a step over the budget is an error (exit 1).
// Where the plan splits the batch into micro-batches, the step timed is one micro-batch's.
// The built-in workloads (bert_mini, ...) have no config, so they cannot be planned.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "lb/train/memory/memory_planner.h"
#include "lb/train/memory/memory_report.h"
#include "src/cli/bench_workloads.h"
#include "src/cli/cli_parse.h"

namespace lb::cli {

namespace {

std::string mib(int64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / (1024.0 * 1024.0) << " MiB";
  return os.str();
}

std::string summary(const nlohmann::json& r) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << r["config"].get<std::string>() << " ["
     << r["strategy"].get<std::string>() << "]: " << r["ms_per_step"].get<double>() << " ms/step (forward "
     << r["forward_ms"].get<double>() << " ms, backward " << r["backward_ms"].get<double>() << " ms, optimizer "
     << r["optimizer_ms"].get<double>() << " ms), " << r["examples"].get<int64_t>() << " examples, activation peak "
     << mib(r["activation_peak_bytes"].get<int64_t>()) << ", whole step " << mib(r["step_peak_bytes"].get<int64_t>())
     << ", kept " << mib(r["saved_bytes"].get<int64_t>())
     << ", median of " << r["iters"].get<int>() << " steps, threads " << r["threads"]["omp"].get<int>();
  if (r.contains("memory_plan")) {
    const auto& p = r["memory_plan"];
    const bool whole = p.value("scope", std::string("activation")) == "step";
    os << (whole ? "\nmemory budget " : "\nactivation budget ") << p["budget"].get<std::string>() << " ("
       << mib(p["budget_bytes"].get<int64_t>()) << "): planned peak " << mib(p["predicted_peak_bytes"].get<int64_t>())
       << ", measured " << mib(r[whole ? "step_peak_bytes" : "activation_peak_bytes"].get<int64_t>()) << "; exact step "
       << p["exact_step_ms"].get<double>() << " ms at " << mib(p["exact_peak_bytes"].get<int64_t>())
       << " (planner profiles); plan: " << r["plan"].get<std::string>();
    if (const int64_t k = p.value("micro_batches", int64_t{1}); k > 1)
      os << "\nthe step timed is one of " << k << " micro-batches per optimizer step (no plan fits the batch)";
  }
  return os.str();
}

}  // namespace

int cmd_bench_config(const std::vector<std::string>& args) {
  CLI::App app{"A config's training step on the batch the memory planner profiles, timed; with "
               "--memory-budget, planned first.",
               "leanback bench CONFIG.json"};
  std::string config_path, strategy;
  MemoryBudgetFlag budget;
  std::vector<std::string> sets;
  int iters = 5, warmup = 1, threads = 0;
  bool json = false;
  app.add_option("config", config_path, "the run's JSON config")->required();
  add_memory_budget_option(app, budget, std::string(kMemoryBudgetHelp) + "; the step runs the plan",
                           std::string(kActivationBudgetHelp) + "; the step runs the plan");
  app.add_option("--strategy", strategy, "backward of every compressible Linear/Conv2d (overrides the config's rules)")
      ->check(CLI::IsMember(strategy_names()));
  app.add_option("--set", sets, "override a config key (repeatable)")->allow_extra_args(false);
  app.add_option("--iters", iters, "timed steps")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first, after the attributed one")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  add_threads_option(app, threads);
  app.add_flag("--json", json, "one JSON line");
  if (!parse_cli(app, args)) return 0;
  apply_threads_flag(threads);
  train::Config config = train::load_config(config_path, sets);
  apply_memory_budget_flag(config, budget);
  std::optional<train::MemoryPlan> plan;
  if (config.memory.budget) {
    // The step timed is the longest batch's: plans for shorter ones would go unused.
    plan = train::plan_memory(config, strategy, *config.memory.budget, /*shorter_batches=*/false, {}, /*quiet=*/false);
    config = train::apply_memory_plan(config, *plan);
  }
  const train::MemoryReport r =
      train::memory_report(train::worst_case_batch(config), strategy, warmup + iters);
  std::vector<double> step, fwd, bwd, opt;
  int64_t peak = r.activation_peak_bytes, step_peak = 0;
  for (size_t i = 0; i < r.timed.size(); ++i) {
    const auto& t = r.timed[i];
    peak = std::max(peak, t.activation_peak_bytes);
    step_peak = std::max(step_peak, t.step_peak_bytes);  // the optimizer's state held: after the first
    if (static_cast<int>(i) < warmup) continue;
    fwd.push_back(t.forward_ms);
    bwd.push_back(t.backward_ms);
    opt.push_back(t.optimizer_ms);
    step.push_back(t.forward_ms + t.backward_ms + t.optimizer_ms);
  }
  nlohmann::json j = {{"workload", "config"},
                      {"config", config_path},
                      {"framework", "leanback"},
                      {"strategy", strategy.empty() ? "config" : strategy},
                      {"examples", r.examples},
                      {"iters", iters},
                      {"warmup", warmup},
                      {"ms_per_step", median(step)},
                      {"forward_ms", median(fwd)},
                      {"backward_ms", median(bwd)},
                      {"optimizer_ms", median(opt)},
                      {"saved_bytes", r.saved_bytes},
                      {"activation_peak_bytes", peak},
                      {"step_peak_bytes", step_peak},
                      {"threads", bench_threads()}};
  // memory.budget bounds the whole step, memory.activation_budget the activation peak.
  const bool whole = plan && plan->scope == train::BudgetScope::Step;
  const int64_t bounded = whole ? step_peak : peak;
  if (plan) {
    j["memory_plan"] = plan->to_json();
    j["plan"] = plan->summary();
    j["within_budget"] = bounded <= plan->budget_bytes;
  }
  std::cout << (json ? j.dump() : summary(j)) << std::endl;
  if (plan && bounded > plan->budget_bytes)
    throw Error(config_path + ": the planned step peaked at " + mib(bounded) + ", " +
                mib(bounded - plan->budget_bytes) + " over " + (whole ? "memory.budget " : "memory.activation_budget ") +
                plan->budget_text + " (" + mib(plan->budget_bytes) + "; planned " +
                mib(plan->predicted_peak) + ", measured by the planner " + mib(plan->measured_peak) + ")");
  return 0;
}

}  // namespace lb::cli
