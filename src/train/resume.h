// Internal: continuing a run from one of its checkpoints (`train --resume`).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "lb/nn/module.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"
#include "lb/train/config.h"
#include "lb/train/memory_planner.h"
#include "src/train/trainer_state.h"

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

// Resuming a run that was planned (`saved`, its memory_plan.json): the plan is part of the
// run, so the rest of it runs under the same plan whether or not the budget is given again
// (`config.memory.budget` is set from it). Another plan (`given_plan`, read from
// `given_file`) or explicit memory settings in its place would make it another run: refused.
// Every rank calls it, as every rank reads the checkpoint; `say` prints the notes.
void keep_the_runs_plan(Config& config, const std::optional<MemoryPlan>& given_plan, const std::string& given_file,
                        const std::filesystem::path& saved, bool say);

}  // namespace lb::train
