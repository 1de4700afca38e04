// The gradient-fidelity probe (train.grad_probe_every): how close each compressed layer's
// g_w and g_x come to the exact ones on one held training batch, without changing training.
#pragma once
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/data/batch.h"
#include "lb/nn/backward/strategy.h"
#include "lb/nn/module.h"
#include "lb/train/task_model.h"
#include "lb/train/train_step.h"

namespace lb::train {

// One probe at optimizer step `step` on the first batch of `loader` (positioned afresh):
// per compressed layer (with kept-tensor codecs: per Linear/Conv2d layer) {"layer", "type",
// "local": {"g_w", "g_x"} (compressed layers), "end_to_end": {"g_w", "g_x"}}, each {"cos",
// "rel_err"}, or "probed": false where the layer ran exact. Its forward and
// backward passes are the TrainStep's (no optimizer step); the gradients are zeroed afterwards,
// the module's mode and the layers' strategies restored. The compressed layers draw from
// the step's probe stream (nn/backward/probe.h), never the training stream.
nlohmann::json run_grad_probe(TaskModel& model, TrainStep& train_step,
                              const std::vector<std::shared_ptr<nn::backward::Strategy>>& strategies,
                              data::BatchSource& loader, int64_t step);

}  // namespace lb::train
