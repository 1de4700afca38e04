// `leanback plan CONFIG [--strategy S] [--set k=v]...`: the layer -> backward strategy ->
// reason table a training run would use, with each rule's match count (a rule that decides no
// layer is an error). Builds the model (loading pretrained weights' config) but no data.
// With --memory: one training step on the config's first batch instead, and what it keeps
// for backward by op, role and module, with the step's activation peak (memory_report.h).
// With --memory-budget SIZE (or the config's memory.budget): the memory planner's plan
// (memory_planner.h): per block, its codec and recomputation, bytes, time and why.
#include <algorithm>
#include <iostream>

#include "lb/data/glue.h"
#include "lb/nn/backward/policy.h"
#include "lb/train/memory/memory_planner.h"
#include "lb/train/memory/memory_report.h"
#include "lb/train/run/run_info.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"
#include "src/cli/cli_parse.h"

namespace lb::cli {

int cmd_plan(const std::vector<std::string>& args) {
  CLI::App app{"Print which backward strategy each Linear/Conv2d layer gets, and why.", "leanback plan"};
  std::string config_path, strategy;
  MemoryBudgetFlag budget;
  std::vector<std::string> sets;
  bool json = false, memory = false;
  app.add_option("config", config_path, "the run's JSON config")->required();
  app.add_option("--strategy", strategy, "the run override, as in leanback train")
      ->check(CLI::IsMember(strategy_names()));
  app.add_option("--set", sets, "override a config key (repeatable)")->allow_extra_args(false);
  app.add_flag("--json", json, "print the plan as JSON");
  app.add_flag("--memory", memory,
               "run one training step on the config's first batch and print what it keeps for backward, by op, "
               "role and module, and its activation peak");
  add_memory_budget_option(app, budget, std::string(kMemoryBudgetHelp) + "; prints the plan",
                           std::string(kActivationBudgetHelp) + "; prints the plan");
  if (!parse_cli(app, args)) return 0;
  train::Config c = train::load_config(config_path, sets);
  apply_memory_budget_flag(c, budget);
  if (c.memory.budget) {
    const train::MemoryPlan p = train::plan_memory(c, strategy, *c.memory.budget, true, {}, /*quiet=*/false);
    if (json) std::cout << p.to_json().dump(2) << "\n";
    else std::cout << p.table();
    return 0;
  }
  if (memory) {
    const train::MemoryReport r = train::memory_report(c, strategy);
    if (json) std::cout << r.to_json().dump(2) << "\n";
    else std::cout << r.table();
    return 0;
  }
  int64_t labels = 2;
  const std::string& t = c.data.task;
  if (t == "cifar10") labels = 10;
  else if (t == "cifar100") labels = 100;
  else if (t == "text_regression") labels = 1;
  else if (t == "text_classification") labels = static_cast<int64_t>(train::own_label_names(c).size());
  else if (t != "synthetic" && t != "image_folder") labels = data::glue_task(t).num_labels;
  auto model = train::build_task_model(c, labels, 0);
  for (const auto& g : c.freeze) model->module().freeze(g);
  nn::backward::Plan plan;
  try {
    plan = c.backward.plan(model->module(), strategy);
  } catch (const Error& e) {
    throw Error(config_path + ": " + e.what());
  }
  if (json) std::cout << plan.to_json().dump(2) << "\n";
  else std::cout << plan.table();
  // HOT on a CPU whose int8 GEMM is the portable loop: said here too, before a run is started.
  const bool hot = std::any_of(plan.layers.begin(), plan.layers.end(),
                               [](const nn::backward::PlanEntry& e) { return e.spec.value("type", "") == "hot"; });
  if (hot)
    if (const std::string w = train::hot_kernel_warning(); !w.empty()) std::cerr << "warning: " << w << "\n";
  return 0;
}

}  // namespace lb::cli
