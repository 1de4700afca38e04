// Evaluation of a model over a split: the loss, the predictions and the task's metrics under
// Hugging Face names (eval_loss, eval_accuracy, eval_f1, eval_matthews_correlation,
// eval_pearson, eval_spearmanr, ...), plus per-example outputs for prediction files.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/data/batch.h"
#include "lb/train/run/progress.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"

namespace lb::train {

struct EvalOutput {
  nlohmann::json metrics;                // eval_* (eval_loss only with labels)
  std::vector<int64_t> positions;        // dataset positions, in order
  std::vector<double> predictions;       // class ids, or regression values
  std::vector<double> gold;              // empty when the split is unlabeled
  std::vector<std::vector<float>> logits;
};

// Runs `model` in eval mode without gradients over one pass of `source` (restores the
// model's training mode afterwards). keep_logits stores every example's logits; `progress`
// (optional) hears of every batch.
EvalOutput evaluate(TaskModel& model, data::BatchSource& source, const TaskData& task,
                    bool keep_logits = false, PhaseProgress* progress = nullptr);

}  // namespace lb::train
