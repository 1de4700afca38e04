// Internal: an evaluation during training (rank 0): the "eval" metrics line (Hugging Face
// names: eval_loss, eval_accuracy, ...), its log line, and the best evaluation so far by the
// task's primary metric, kept in the trainer state.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "lb/data/batch.h"
#include "lb/train/run/metrics_log.h"
#include "lb/train/run/progress.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"
#include "src/train/run/trainer_state.h"

namespace lb::train {

struct EvalAtStep {
  nlohmann::json line;  // the metrics line written
  bool best = false;    // the best so far (state.best_metric / best_eval updated)
};

// `bar`: its progress drawn in place (a terminal), else log lines when it runs long. With
// `patience` > 0, the patience-th evaluation in a row without a new best ends the run
// (state.stopped_early, said in the log and the metrics).
EvalAtStep evaluate_at_step(TaskModel& model, data::BatchSource& loader, const TaskData& data,
                            int64_t steps_per_epoch, TrainerState& state, MetricsLog& metrics, const Logger& log,
                            bool bar, int64_t patience);

}  // namespace lb::train
