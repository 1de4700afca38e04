// Internal: everything a training run is made of, built and validated before any training
// work or any change to the run directory: the task's data and loaders, the model with its
// frozen parameters and backward strategies, the optimizer and the schedule.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lb/core/device.h"
#include "lb/data/batch.h"
#include "lb/dist/process_group.h"
#include "lb/nn/backward/policy.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"
#include "lb/train/config.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"
#include "lb/train/train_step.h"

namespace lb::train {

struct TrainingSetup {
  TaskData data;
  std::unique_ptr<TaskModel> model;
  std::string load_log;  // what loading pretrained weights did
  nn::backward::Plan plan;
  std::vector<std::shared_ptr<nn::backward::Strategy>> strategies;
  std::unique_ptr<optim::Optimizer> optimizer;
  // This rank's shard of the training data; the calibration passes' own stream over it;
  // the evaluation split (rank 0 evaluates).
  std::unique_ptr<data::BatchSource> train_loader, calib_loader, eval_loader;
  int64_t batches = 0;          // micro-batches per epoch
  int64_t steps_per_epoch = 0;  // optimizer steps per epoch (batches / grad_accum, rounded up)
  int64_t total_steps = 0;
  int64_t eval_every = 0;
  optim::LrSchedule schedule;
};

// The config as a training run uses it, resolved once before set-up and constant after:
// data.padding "auto" is dynamic; BERT's model.skip_padding "auto" is true (padding-free).
Config resolved_for_training(Config config);

// Builds the run's parts from a resolved `config` (resolved_for_training) with the backward
// strategies of the config's policy (or every layer `strategy`, the --strategy override), the
// model on `device`. Errors name the config file.
TrainingSetup set_up_training(const Config& config, const std::string& strategy, Device device,
                              const dist::ProcessGroup& pg);

// The TrainStep options of a run set up from `config`: clipping, schedule, ranks, device, the
// layers' strategies and the kept-tensor codecs (a memory plan's: the longest batch's). One
// wiring for training and for the memory report's measured step (as rank 0 of a run).
// previous_grad_norm: a resumed run's last (optimizer.in_backward clips by it).
TrainStepOptions train_step_options(const Config& config, const TrainingSetup& s, dist::ProcessGroup& pg,
                                    const Device& device, double previous_grad_norm = 0);

}  // namespace lb::train
