// Internal: continuing a run from one of its checkpoints (`train --resume`).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "lb/nn/module.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"
#include "lb/train/config.h"
#include "src/train/run/trainer_state.h"

namespace lb::train {

// Loads checkpoint `ckpt` into the module and optimizer and returns its trainer state. The
// config's rates and weight decay apply from here on (the schedule continues from the
// checkpoint's step, scaled from the new peak rate), and a config that differs from the
// checkpoint's is warned about. Rank 0 drops the metric lines past the step from
// `run_dir`/metrics.jsonl; checkpoints past it leave the state's list (they belong to the
// abandoned future).
TrainerState resume_run(const std::string& ckpt, nn::Module& module, optim::Optimizer& optimizer,
                        const optim::LrSchedule& schedule, const Config& config, int64_t total_steps,
                        const std::filesystem::path& run_dir, bool main_rank);

}  // namespace lb::train
