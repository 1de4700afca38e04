// Internal: the trainer's run directory (trainer.h lists its files): whether it may be used
// (output_dir.h: never what leanback did not write), clearing an old run, the resolved config
// and plan, and checkpoints with retention. Rank 0 alone writes; the other ranks take its
// verdicts.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lb/dist/process_group.h"
#include "lb/nn/module.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"
#include "lb/train/run/progress.h"
#include "src/train/run/trainer_state.h"

namespace lb::train {

// The step of a "checkpoint-<N>" directory name, or -1.
int64_t checkpoint_step(const std::filesystem::path& p);

class RunDirectory {
 public:
  // Decides (rank 0; the verdict is broadcast) whether `path` may hold this run: resuming
  // from `resume_ckpt` (empty: a new run), with or without --overwrite. Throws OutputRefused.
  RunDirectory(std::filesystem::path path, const std::string& resume_ckpt, bool overwrite, dist::ProcessGroup& pg);

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path checkpoint_path(int64_t step) const;

  // Once everything else is validated: clears an old run (--overwrite: only the files
  // leanback wrote; the rest is listed on stderr unless quiet) and creates the directory with
  // its marker; from then on the run's log lines also go to its train.log.
  void prepare(bool quiet);
  // Records `name` in the directory's marker (what --overwrite may delete), then writes it
  // (rank 0; atomically).
  void write_file(const std::string& name, const std::string& text) const;
  // config.json (the resolved config) and plan.txt; with a memory budget, memory_plan.json
  // (the planner's plan, which a resumed run reuses; null: none).
  void write_run_files(const nlohmann::json& resolved_config, const std::string& plan_table,
                       const nlohmann::json& memory_plan = nullptr);

  // Writes checkpoint-<state.step> (model, optimizer, schedule, `extra` and the trainer state
  // with this process's calibrations added from `calibrator_report`), then deletes all but the
  // newest `keep` and the best. A non-finite state is refused: Diverged, naming the last good
  // checkpoint.
  void save(TrainerState& state, bool is_best, const nn::Module& module, const optim::Optimizer& optimizer,
            const optim::LrSchedule& schedule, const nlohmann::json& extra, const nlohmann::json& calibrator_report,
            int64_t keep, const Logger& log);
  // The newest checkpoint written or resumed from ("" if none).
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  // "; the last good checkpoint is …" (or that none was written yet), for error messages.
  std::string last_good_note() const;

 private:
  std::filesystem::path path_;
  bool main_rank_;
  bool replace_ = false;
  std::string last_checkpoint_;
  std::unique_ptr<LogFile> log_file_;
};

}  // namespace lb::train
