// What one training step keeps for backward, attributed (leanback plan --memory): the config's
// model, strategies and first training batch, calibrated as training would be at step 0, then
// one step. At the end of its forward every kept tensor is attributed to (module, op, role)
// (autograd/saved_breakdown.h); over the step, the activation peak (lb/core/allocator.h: all
// bytes but parameters, buffers, gradients and optimizer state), each tag's share of it, and
// where it was set (autograd/peak_watch.h): which node ran and which kept tensors were live.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/autograd/peak_watch.h"
#include "lb/autograd/saved_breakdown.h"
#include "lb/core/allocator.h"
#include "lb/core/process_memory.h"
#include "lb/train/config.h"

namespace lb::train {

struct MemoryReport {
  std::string strategy;  // the --strategy override ("" : the config's policy)
  int64_t examples = 0;  // in the batch
  std::vector<autograd::SavedEntry> entries;
  int64_t saved_bytes = 0;  // autograd::saved_bytes() at the end of the forward: Σ entries
  int64_t activation_peak_bytes = 0;
  std::array<int64_t, kNumMemTags> at_activation_peak{};
  // The whole step (the attributed one): the allocator's peak and each category's (parameters,
  // gradients, optimizer state, ...), its cache, and the process's memory after it.
  int64_t step_peak_bytes = 0;
  std::array<int64_t, kNumMemTags> step_peak_by_tag{};
  int64_t allocator_cached_bytes = 0;
  ProcessMemory process;
  // Where the peak was set and what the tape kept then (none: it never rose in the step).
  std::optional<autograd::PeakSite> peak_site;
  // The model's recomputable blocks (lb/nn/recomputable_block.h), outermost only, in order.
  std::vector<std::string> blocks;
  double step_ms = 0;  // the fastest of the timed steps after it (0: none asked for)
  // Each timed step's phases (TrainStep's clocks) and activation peak, in order.
  struct TimedStep {
    double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
    int64_t activation_peak_bytes = 0, step_peak_bytes = 0;
  };
  // The whole step once the optimizer holds its state (the attributed step, the first, makes
  // it): a second step on the same micro-batches, its allocator peak and each category's own
  // peak in it (0: not asked for).
  int64_t steady_peak_bytes = 0;
  std::array<int64_t, kNumMemTags> steady_peak_by_tag{};
  std::vector<TimedStep> timed;
  // The allocator's peak over the whole call: the set-up (model, calibration) and every step.
  int64_t run_peak_bytes = 0;

  // Bytes by op kind and by module, largest first; the total and the peak.
  std::string table() const;
  nlohmann::json to_json() const;
};

// `config` as `leanback train` would run it (strategy: the --strategy override), one step on
// its first training batch, on the CPU, then `timed_steps` more on the same batch, timed.
// Where train.grad_accum = k > 1 the measured step is the trainer's first: k micro-batches,
// all loaded before it runs them, the later ones holding each parameter's gradient as a
// temporary before adding it into .grad (an accumulating step's peak can be set by either).
// `real_tokens` > 0 (text): the batch's attention mask keeps that many tokens in all, whole
// sequences first, the rest padding (the memory planner's profile of batches with at most so
// many real tokens). Errors name the config file.
// `steady_step`: one more step first, measured as steady_peak_bytes.
MemoryReport memory_report(const Config& config, const std::string& strategy, int timed_steps = 0,
                           int64_t real_tokens = 0, bool steady_step = false);

}  // namespace lb::train
