// Resuming a run (see resume.h).
#include "src/train/run/resume.h"

#include <sstream>
#include <set>
#include <utility>
#include <vector>

#include "lb/core/error.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/run/metrics_log.h"
#include "lb/train/run/progress.h"

namespace lb::train {

namespace fs = std::filesystem;

namespace {
std::string number(double v) {  // as a stream prints it: 3e-05, 0.01
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

TrainerState resume_run(const std::string& ckpt, nn::Module& module, optim::Optimizer& optimizer,
                        const optim::LrSchedule& schedule, const Config& config, int64_t total_steps,
                        const fs::path& run_dir, bool main_rank) {
  // The config's rates and decay, which a resumed run applies (see below).
  std::vector<std::pair<double, double>> configured;
  for (const auto& g : optimizer.groups()) configured.emplace_back(g.initial_lr, g.weight_decay);
  const LoadedCheckpoint ck = load_checkpoint(ckpt, module, &optimizer);
  const std::string where = (fs::path(ckpt) / "trainer_state.json").string();
  LB_CHECK(ck.state.contains("extra") && ck.state["extra"].contains("trainer"), where,
           ": not a checkpoint written by leanback train (no extra.trainer)");
  TrainerState st;
  st.from_json(ck.state["extra"]["trainer"], where);
  LB_CHECK(st.step == ck.step, where, ": trainer step ", st.step, " and optimizer step ", ck.step, " disagree");
  LB_CHECK(st.step <= total_steps, where, ": the checkpoint is at step ", st.step, ", past this config's ",
           total_steps, " steps");
  const Logger log(!main_rank);  // also into the run's train.log
  for (const auto& n : ck.notes) log.info("resume: " + n);
  // A changed optimizer.lr / weight_decay takes effect (never recorded and then ignored): the
  // schedule continues from this step, scaled from the new peak rate.
  auto& groups = optimizer.groups();
  std::set<std::pair<double, double>> lr_noted;  // (now, before): one note each, not one per group
  for (size_t i = 0; i < groups.size() && i < configured.size(); ++i) {
    if (groups[i].initial_lr != configured[i].first && main_rank &&
        lr_noted.emplace(configured[i].first, groups[i].initial_lr).second)
      log.info("resume: optimizer.lr is now " + number(configured[i].first) + " (the checkpoint's run had " +
               number(groups[i].initial_lr) + "): the schedule continues from step " + std::to_string(ck.step) +
               " scaled from the new rate");
    if (groups[i].weight_decay != configured[i].second && main_rank)
      log.info("resume: weight decay of parameter group " + std::to_string(i) + " is now " +
               number(configured[i].second) + " (the checkpoint's run had " + number(groups[i].weight_decay) + ")");
    groups[i].initial_lr = configured[i].first;
    groups[i].weight_decay = configured[i].second;
    groups[i].lr = configured[i].first * schedule.factor(ck.step);
  }
  // A changed config is allowed (e.g. a new lr), but then the run is no longer the one saved.
  if (ck.state["extra"].contains("config")) {
    const nlohmann::json saved = ck.state["extra"]["config"], now = config.to_json();
    std::string changed;
    for (auto it = now.begin(); it != now.end(); ++it)
      if (it.key() != "output" && (!saved.contains(it.key()) || saved[it.key()] != *it))
        changed += (changed.empty() ? "" : ", ") + it.key();
    if (!changed.empty())
      log.warn("resume: the config differs from the checkpoint's in: " + changed +
               " (the continued run will not equal an uninterrupted one)");
  }
  // Drop metric lines the resumed steps will write again.
  if (main_rank) truncate_metrics((run_dir / "metrics.jsonl").string(), st.step);
  // Checkpoints past the resumed one belong to the abandoned future.
  std::vector<int64_t> kept;
  for (int64_t s : st.checkpoints)
    if (s <= st.step && fs::exists(run_dir / ("checkpoint-" + std::to_string(s)))) kept.push_back(s);
  st.checkpoints = kept;
  return st;
}

}  // namespace lb::train
