// The trainer's run directory (see run_directory.h).
#include "src/train/run/run_directory.h"

#include <algorithm>
#include <iostream>

#include "lb/core/error.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/train_step.h"
#include "lb/train/trainer.h"

namespace lb::train {

namespace fs = std::filesystem;

std::string resolve_run_dir(const Config& config, const TrainOptions& opt) {
  if (!opt.out_dir.empty()) return opt.out_dir;
  if (!config.output.dir.empty()) return config.output.dir;
  // Outside the working tree (a clone of ours, or a user's project), like the models.
  const std::string home = leanback_home();
  LB_CHECK(!home.empty(), config.source, ": output.dir: not set, and neither is LEANBACK_HOME or HOME for the default "
           "($LEANBACK_HOME/runs/<config name>); pass --out DIR");
  return (fs::path(home) / "runs" / fs::path(config.source).stem()).string();
}

int64_t checkpoint_step(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.rfind("checkpoint-", 0) != 0) return -1;
  try {
    size_t used = 0;
    const int64_t s = std::stoll(name.substr(11), &used);
    return used == name.size() - 11 ? s : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

std::string find_checkpoint(const std::string& path, const std::string& flag) {
  LB_CHECK(fs::is_directory(path), flag, " ", path, ": no such directory");
  if (fs::exists(fs::path(path) / "trainer_state.json")) return path;
  int64_t best = -1;
  std::string found;
  for (const auto& e : fs::directory_iterator(path)) {
    const int64_t s = checkpoint_step(e.path());
    if (s > best && fs::exists(e.path() / "trainer_state.json")) {
      best = s;
      found = e.path().string();
    }
  }
  LB_CHECK(!found.empty(), flag, " ", path,
           ": no checkpoint in it (expected trainer_state.json, or checkpoint-<step>/ folders)");
  return found;
}

std::string find_best_checkpoint(const std::string& path, const std::string& flag) {
  const std::string newest = find_checkpoint(path, flag);
  if (newest == path) return newest;  // a checkpoint itself
  const nlohmann::json state = io::read_json_file((fs::path(newest) / "trainer_state.json").string());
  const nlohmann::json best = state.value("extra", nlohmann::json::object())
                                  .value("trainer", nlohmann::json::object())
                                  .value("best_step", nlohmann::json(-1));
  if (!best.is_number_integer() || best.get<int64_t>() < 0) return newest;
  const fs::path p = fs::path(path) / ("checkpoint-" + std::to_string(best.get<int64_t>()));
  return fs::exists(p / "trainer_state.json") ? p.string() : newest;
}

RunDirectory::RunDirectory(fs::path path, const std::string& resume_ckpt, bool overwrite, dist::ProcessGroup& pg)
    : path_(std::move(path)), main_rank_(pg.is_main()), last_checkpoint_(resume_ckpt) {
  // Rank 0 owns the run directory: it decides, and the other ranks take its verdict (they
  // would otherwise race with its first writes).
  std::string refused;
  if (main_rank_) {
    try {
      replace_ = run_dir_verdict(path_, resume_ckpt.empty() ? fs::path() : fs::path(resume_ckpt), overwrite);
    } catch (const OutputRefused& e) {
      refused = e.what();
    }
  }
  if (pg.size() > 1) pg.broadcast(refused, 0, "run directory check");
  if (!refused.empty()) throw OutputRefused(refused);
}

fs::path RunDirectory::checkpoint_path(int64_t step) const {
  return path_ / ("checkpoint-" + std::to_string(step));
}

void RunDirectory::prepare(bool quiet) {
  if (!main_rank_) return;
  // A checkpoint this run writes would replace what stands at its name: only ours may. Checked
  // before an old run is cleared, so that a refusal leaves the directory as it was. (Without
  // a marker the directory is new, or a run from before markers, whose names it records.)
  if (output_marker(path_))
    for (const auto& e : fs::directory_iterator(path_)) {
      const fs::path& p = e.path();
      if (checkpoint_step(p) < 0 || (was_written(path_, p.filename().string()) && !output_marker(p))) continue;
      const auto marker = output_marker(p);
      throw OutputRefused("run directory " + path_.string() + " holds " + p.filename().string() + ", which " +
                          (marker ? "is a leanback " + std::string(output_kind_name(*marker)) + " directory"
                                  : std::string("leanback did not write there")) +
                          ", not a checkpoint of this run; a checkpoint at that step would replace it: move " +
                          p.string() + " out of the run directory, or pass --out DIR");
    }
  if (replace_) {
    const auto kept = remove_owned_entries(path_, OutputKind::Run);
    if (!kept.empty() && !quiet) std::cerr << kept_entries_note(path_, kept) << "\n";
  }
  create_output_dir(path_, OutputKind::Run, "--out");
  record_written(path_, {"train.log"});
  log_file_ = std::make_unique<LogFile>((path_ / "train.log").string());
}

void RunDirectory::write_file(const std::string& name, const std::string& text) const {
  if (!main_rank_) return;
  record_written(path_, {name});
  io::write_text_atomic((path_ / name).string(), text);
}

void RunDirectory::write_run_files(const nlohmann::json& resolved_config, const std::string& plan_table,
                                   const nlohmann::json& memory_plan) {
  if (!main_rank_) return;
  record_written(path_, {"metrics.jsonl"});  // the trainer's MetricsLog writes it next
  write_file("config.json", resolved_config.dump(2) + "\n");
  write_file("plan.txt", plan_table);
  if (!memory_plan.is_null()) write_file("memory_plan.json", memory_plan.dump(2) + "\n");
}

std::string RunDirectory::last_good_note() const {
  return last_checkpoint_.empty() ? std::string("; no checkpoint was written yet")
                                  : "; the last good checkpoint is " + last_checkpoint_;
}

void RunDirectory::save(TrainerState& st, bool is_best, const nn::Module& module, const optim::Optimizer& optimizer,
                        const optim::LrSchedule& schedule, const nlohmann::json& extra,
                        const nlohmann::json& calibrator_report, int64_t keep_newest, const Logger& log) {
  if (!main_rank_) return;
  if (std::find(st.checkpoints.begin(), st.checkpoints.end(), st.step) == st.checkpoints.end())
    st.checkpoints.push_back(st.step);
  if (is_best) st.best_step = st.step;
  nlohmann::json all = extra;
  all["trainer"] = st.with_calibrations(calibrator_report).to_json();
  const fs::path dir = checkpoint_path(st.step);
  const std::string name = dir.filename().string();
  // Written mid-run in a directory checked at the start (prepare): what stands at the name
  // now and is not ours is someone's, and saving would replace it.
  LB_CHECK(!fs::exists(fs::symlink_status(dir)) || (was_written(path_, name) && !output_marker(dir)), dir.string(),
           " appeared during the run and is not a checkpoint of it; move it away and continue with --resume ",
           path_.string(), last_good_note());
  record_written(path_, {name});
  try {
    save_checkpoint(dir.string(), module, &optimizer, &schedule, all);
  } catch (const NonFiniteState& e) {
    // The optimizer step made the state non-finite: the run diverged. The last checkpoint
    // (never deleted before a newer one is written) stays the last good one.
    throw Diverged("step " + std::to_string(st.step) + ": " + e.what() + last_good_note());
  }
  last_checkpoint_ = dir.string();
  // Keep the newest keep_newest and the best; delete the rest.
  std::vector<int64_t> keep;
  const int64_t n = static_cast<int64_t>(st.checkpoints.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = st.checkpoints[i];
    if (i >= n - keep_newest || s == st.best_step) {
      keep.push_back(s);
    } else if (const std::string k = remove_checkpoint_dir(checkpoint_path(s)); !k.empty()) {
      log.warn("retention: " + k);
    } else {
      forget_written(path_, {checkpoint_path(s).filename().string()});
    }
  }
  st.checkpoints = keep;
}

}  // namespace lb::train
