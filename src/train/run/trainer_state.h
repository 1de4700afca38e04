// Internal: what the training loop carries from step to step and saves in every checkpoint
// (trainer_state.json's extra.trainer), so a resumed run continues where it stopped: the step,
// the calibration stream's position, the best evaluation, the checkpoints on disk and the
// whole run's totals (across resumes).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lb::train {

struct TrainerState {
  int64_t step = 0;             // optimizer steps done
  int64_t calib_batches = 0;    // calibration micro-batches drawn so far
  double best_metric = -std::numeric_limits<double>::infinity();
  int64_t best_step = -1;
  int64_t evals_since_best = 0;  // evaluations since best_step's (train.early_stopping_patience)
  bool stopped_early = false;    // the run ended there: a resume has nothing left to train
  double last_grad_norm = 0;     // the last step's (optimizer.in_backward clips by it)
  std::vector<int64_t> checkpoints;  // steps with a checkpoint on disk, oldest first
  nlohmann::json best_eval = nlohmann::json::object();
  // Totals over the whole run, across resumes (eval_results.json and compare report them).
  double train_ms = 0;          // optimizer steps only (no evaluation, calibration, saving)
  int64_t train_examples = 0;
  int64_t timed_steps = 0;      // the steps train_ms covers
  double probe_ms = 0;          // the gradient-fidelity probe (train.grad_probe_every)
  int64_t calibrations = 0;     // before this process's Calibrator, which counts its own
  double calibration_ms = 0;
  std::vector<int64_t> calibration_steps;

  void add_timed_step(double ms, int64_t examples) {
    train_ms += ms;
    train_examples += examples;
    ++timed_steps;
  }

  nlohmann::json to_json() const;
  // `where` (the trainer_state.json path) prefixes every error.
  void from_json(const nlohmann::json& j, const std::string& where);
  // These totals with a Calibrator's report ({"calibrations", "ms_total", "steps"}) added.
  TrainerState with_calibrations(const nlohmann::json& calibrator_report) const;
};

}  // namespace lb::train
