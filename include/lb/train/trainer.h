// The training loop behind `leanback train`, in the manner of Hugging Face's Trainer:
// optimizer steps over a seeded data order, gradient accumulation, clipping, warm-up
// schedules, backward-strategy calibration through the Calibrator, evaluation and
// checkpoints, metrics streamed to the run directory, exact resume.
//
// Run directory:
//   config.json          the resolved config (every default filled in)
//   plan.txt             layer -> backward strategy -> reason
//   metrics.jsonl        line 1: {"type":"run", config, environment, git commit, plan};
//                        then "train" lines (every train.log_every steps), "eval" lines
//                        (Hugging Face names: eval_loss, eval_accuracy, ...), "calibration",
//                        "probe" (train.grad_probe_every: per-layer gradient fidelity)
//   eval_results.json    the final and the best evaluation
//   train.log            the run's log lines as the console showed them (appended on resume)
//   scalars.csv          the train and eval lines' numbers as step,tag,value rows
//   events.out.tfevents.*  the same for TensorBoard (metrics_log.h)
//   checkpoint-<step>/   model.safetensors, optimizer.safetensors, trainer_state.json
//
// Data order and resume: optimizer step s of an epoch of E = ceil(batches / grad_accum) steps
// consumes micro-batches [j·k, min((j+1)·k, batches)) of epoch s / E (j = s mod E, k =
// grad_accum), in the epoch's order (data::epoch_order(seed, epoch)); the micro-batch losses
// are weighted by their share of the step's examples, so k micro-batches of B equal one batch
// of k·B. Calibration batches come from their own shuffled stream over the training data,
// positioned by a counter. Everything that decides the next step — weights, optimizer state,
// the default generator (dropout), strategy state, the step and that counter — is in the
// checkpoint, so an interrupted run resumed from it continues bit-for-bit on the CPU.
//
// Checkpoints are written at every evaluation and every train.save_every steps, on
// interruption and at the end. Retention: the train.keep_checkpoints most recent ones and the
// best (by the task's primary metric) are kept; the best is never deleted.
#pragma once
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/dist/process_group.h"

#include "lb/train/config.h"
#include "lb/train/train_step.h"  // Diverged

namespace lb::train {

struct TrainOptions {
  std::string strategy;          // run override of backward strategies ("" = config's policy)
  std::string out_dir;           // "" = config.output.dir, else runs/<config stem>
  std::string resume;            // a run directory (its latest checkpoint) or a checkpoint
  std::optional<uint64_t> seed;  // overrides train.seed
  // A saved memory plan (load_memory_plan) to train under instead of planning; sets
  // memory.budget to its budget where the config has none.
  std::string memory_plan;
  bool overwrite = false;        // allow reusing an existing, non-empty run directory
  int progress = -1;             // -1: progress bar when stderr is a terminal; 0 off; 1 on
  bool quiet = false;            // no per-step log lines (tests)
  // Where the model, its batches and the optimizer state live. On a CUDA device every
  // layer must run the vanilla strategy for now (INSTANT's and HOT's kernels are CPU-only).
  // Data-parallel on GPUs (mpirun): each rank takes its local rank's GPU, collectives over NCCL.
  Device device = Device::cpu();
  // Test hook: behave as if interrupted (Ctrl-C) after this many optimizer steps.
  int64_t interrupt_after = 0;
  // Test hook: called before each evaluation with the step (a throw fails that evaluation).
  std::function<void(int64_t step)> before_eval;
  // Data-parallel group (nullptr: dist::world(), i.e. MPI under mpirun, else one process).
  // data.batch_size is per rank; rank 0 alone writes the run directory.
  dist::ProcessGroup* group = nullptr;
};

struct TrainResult {
  std::string run_dir;
  int64_t steps = 0;
  bool interrupted = false;
  nlohmann::json final_eval;     // eval_* metrics at the end ({} when interrupted)
  nlohmann::json best_eval;
  std::string best_checkpoint;
  std::string last_checkpoint;
  std::vector<double> losses;    // training loss of every optimizer step run in this process
  double train_runtime_s = 0;    // optimizer steps of this process only (no evaluation, saving)
  double train_samples_per_second = 0;
  nlohmann::json memory_plan;    // the plan this process carried out (memory.budget), else null
  // Steps this process ran under each of its plans per batch length ({"32": n, ...,
  // "longest": n}; empty without them).
  nlohmann::json memory_plan_steps = nlohmann::json::object();
};

// Runs training to the end (or until interrupted). Throws lb::Error on bad input, Diverged on
// a non-finite loss, gradient or weights (after which the last good checkpoint remains),
// OutputRefused (output_dir.h) when the run directory may not be used.
TrainResult train(const Config& config, const TrainOptions& opt);

// Set by the SIGINT handler the CLI installs: the loop saves a checkpoint and stops after
// the current step.
std::atomic<bool>& stop_requested();

// The run directory train() would use for this config and options.
std::string resolve_run_dir(const Config& config, const TrainOptions& opt);
// The checkpoint to resume from: `path` itself if it holds trainer_state.json, else the
// highest-step checkpoint-<N> inside it. Errors name the path and `flag`, the option it came from.
std::string find_checkpoint(const std::string& path, const std::string& flag = "--resume");
// A run's best checkpoint by the task's primary metric (the best step its newest checkpoint
// records, kept by retention): `path` itself if it is a checkpoint, else the newest where no
// evaluation has chosen a best or the best is not there.
std::string find_best_checkpoint(const std::string& path, const std::string& flag);

}  // namespace lb::train
