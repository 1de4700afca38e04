// Shared timing loop of the model workloads (bert_mini, vit_tiny, resnet18): full training
// steps — forward with loss, backward, optimizer step, zero_grad — warm-up first, then the
// medians of each phase and of the whole step. Saved bytes are read after the forward of the
// last timed step (the graph is identical every step); the allocator's peak is reset after
// the warm-up, so it is the peak of steady-state steps (parameters, gradients and optimizer
// state included, as they are resident).
//
// --strategy S [--rank N] (anything but plain vanilla) assigns backward strategies as a run
// override of the default Policy: every trainable, compressible Linear/Conv2d (heads, pooler
// and embeddings excluded, lb/nn/backward/policy.h) gets {"type": S, "rank": N}, the others
// run vanilla. Calibrations (INSTANT's bases at step 0, HOT's quantiser choice) run through
// the Calibrator before the step that needs them, outside the timed phases, and are reported
// apart; each step keys the strategies' random streams (HOT) by its number.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/tensor.h"
#include "lb/nn/backward/strategy.h"
#include "lb/nn/module.h"
#include "lb/optim/optimizer.h"
#include "src/cli/bench_workloads.h"

namespace lb::cli {

struct TrainStepTimes {
  double ms_per_step = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  int64_t saved_bytes = 0;
  int64_t activation_peak_bytes = 0;  // the largest timed step's activation peak
  int64_t peak_bytes = 0;       // allocator total peak over the timed steps
  nlohmann::json peak_by_tag;   // per-tag peaks (parameter, gradient, optimizer, saved, ...)
  int64_t cached_bytes = 0;     // freed blocks the allocator keeps for reuse, after the steps
  int64_t peak_rss_bytes = 0;   // the process's peak resident set (as the PyTorch twins report)
  double calibration_ms = 0;    // untimed calibration passes, in total
  int64_t calibrations = 0;
};

using StrategyList = std::vector<std::shared_ptr<nn::backward::Strategy>>;

// The strategies for `model` under --strategy/--rank (empty for plain vanilla: the plain ops,
// what the PyTorch twins measure). Bad names/ranks fail with the flag in the message.
StrategyList apply_bench_strategy(nn::Module& model, const BenchOptions& opt);

// Times train::TrainStep on `model`: `forward` runs it on the workload's fixed batch of
// `batch` examples and returns the scalar loss.
TrainStepTimes time_train_steps(const BenchOptions& opt, nn::Module& model, int64_t batch,
                                const std::function<Tensor()>& forward, optim::Optimizer& optimizer,
                                const StrategyList& strategies = {});

// The JSON line every model workload prints (extra fields are merged in); with strategies,
// also their settings and the accounting totals (paper metrics and measured backward cost).
nlohmann::json train_step_json(const std::string& workload, const BenchOptions& opt,
                               const TrainStepTimes& t, int64_t parameters,
                               const nlohmann::json& extra, const StrategyList& strategies = {});

}  // namespace lb::cli
