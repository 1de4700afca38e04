// Internal: the trainer's calibrations (INSTANT's bases, HOT's quantiser choice) before the
// optimizer steps that need them, on their own stream of training batches (positioned by
// TrainerState::calib_batches, so a resumed run draws the batches an uninterrupted one would).
// One calibration pass sees what one optimizer step sees: grad_accum micro-batches, their
// losses weighted as in training, so accumulation leaves the statistics unchanged.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/data/batch.h"
#include "lb/dist/process_group.h"
#include "lb/nn/backward/calibration.h"
#include "lb/train/run/metrics_log.h"
#include "lb/train/run/progress.h"
#include "lb/train/task_model.h"
#include "lb/train/train_step.h"
#include "src/train/run/trainer_state.h"

namespace lb::train {

class CalibrationSchedule {
 public:
  // group: data-parallel ranks (nullptr: one process); the statistics are summed over them.
  CalibrationSchedule(std::vector<std::shared_ptr<nn::backward::Strategy>> strategies, TaskModel& model,
                      TrainStep& step, data::BatchSource& loader, int64_t batches_per_epoch, int64_t grad_accum,
                      dist::ProcessGroup* group);

  // Calibrates the strategies that want it before optimizer step `step` (none: nothing):
  // a "calibration" metrics line, a warning line and log for each layer whose calibration
  // failed (it runs the exact backward from then on), and a log line naming the calibrated
  // layers that keep the exact backward at their shape (no gain in bytes or FLOPs there).
  void run_if_due(int64_t step, TrainerState& state, MetricsLog& metrics, const Logger& log, Progress& progress);

  // Called with each calibration pass's micro-batches before it runs (the trainer puts the
  // memory plan for their length in force).
  void set_before_pass(std::function<void(const std::vector<data::Batch>&)> f) { before_pass_ = std::move(f); }

  // The Calibrator's report: calibrations, their time and steps, per-layer ranks and costs.
  nlohmann::json report() const { return calibrator_.report(); }

 private:
  void say_exact_layers(int64_t step, MetricsLog& metrics, const Logger& log) const;
  nn::backward::Calibrator calibrator_;
  std::vector<std::shared_ptr<nn::backward::Strategy>> strategies_;
  TaskModel& model_;
  TrainStep& step_;
  data::BatchSource& loader_;
  int64_t batches_, grad_accum_;
  std::function<void(const std::vector<data::Batch>&)> before_pass_;
};

}  // namespace lb::train
