// Shared timing loop of the model workloads (bert_mini, vit_tiny, resnet18): full training
// steps — forward with loss, backward, optimizer step, zero_grad — warm-up first, then the
// medians of each phase and of the whole step. Saved bytes are read after the forward of the
// last timed step (the graph is identical every step); the allocator's peak is reset after
// the warm-up, so it is the peak of steady-state steps (parameters, gradients and optimizer
// state included, as they are resident).
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "lb/core/tensor.h"
#include "lb/optim/optimizer.h"
#include "src/cli/bench_workloads.h"

namespace lb::cli {

struct TrainStepTimes {
  double ms_per_step = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  int64_t saved_bytes = 0;
  int64_t peak_bytes = 0;       // allocator total peak over the timed steps
  nlohmann::json peak_by_tag;   // per-tag peaks (parameter, gradient, optimizer, saved, ...)
  int64_t cached_bytes = 0;     // freed blocks the allocator keeps for reuse, after the steps
  int64_t peak_rss_bytes = 0;   // the process's peak resident set (as the PyTorch twins report)
};

// Model workloads measure the vanilla backward; other --strategy/--rank values are a usage error.
void require_vanilla(const std::string& workload, const BenchOptions& opt);

// `forward` runs the model on the workload's fixed batch and returns the scalar loss.
TrainStepTimes time_train_steps(const BenchOptions& opt, const std::function<Tensor()>& forward,
                                optim::Optimizer& optimizer);

// The JSON line every model workload prints (extra fields are merged in).
nlohmann::json train_step_json(const std::string& workload, const BenchOptions& opt,
                               const TrainStepTimes& t, int64_t parameters,
                               const nlohmann::json& extra);

}  // namespace lb::cli
