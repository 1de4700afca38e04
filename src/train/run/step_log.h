// Internal: the trainer's "train" lines: every train.log_every steps, the means over the steps
// since the last line (loss, gradient norm, phase times, bytes kept for backward, the papers'
// accounting) with the allocator's peaks, as a metrics.jsonl line and a log line.
#pragma once
#include <cstdint>

#include "lb/core/device.h"
#include "lb/train/run/metrics_log.h"
#include "lb/train/run/progress.h"
#include "lb/train/train_step.h"

namespace lb::train {

class StepLog {
 public:
  StepLog(int64_t total_steps, int64_t steps_per_epoch, int64_t ranks, Device device);

  // One optimizer step: its result, its whole time (getting its batches included) and the
  // part spent getting its batches (collating text, or waiting for the image workers).
  void add(const StepResult& r, double step_ms, double data_ms);
  // Writes the line for the steps added since the last one (ending at optimizer step `step`),
  // then starts a new window and resets the allocator's peak.
  void flush(int64_t step, MetricsLog& metrics, Progress& progress);
  // The whole step's memory over the lines written (eval_results.json "memory"): the largest
  // allocator peak, each tag's largest peak, the allocator's cache, and the process's RSS.
  nlohmann::json memory_summary() const;

 private:
  struct Window {
    double loss = 0, grad_norm = 0, step_ms = 0, fwd = 0, bwd = 0, opt = 0, wait = 0, sync = 0, lr = 0;
    int64_t steps = 0, examples = 0, saved_max = 0;
    double saved_sum = 0;
    double paper_flops_sum = 0, paper_saved_sum = 0;  // per example, summed over steps
    // The largest step activation peak, and each tag's bytes at it.
    int64_t activation_peak = 0;
    std::array<int64_t, kNumMemTags> at_activation_peak{};
  };
  int64_t total_steps_, steps_per_epoch_, ranks_;
  Device device_;
  Window win_;
  // Over the whole run (this process's part of it, after a resume).
  int64_t run_peak_ = 0, run_cached_ = 0;
  std::array<int64_t, kNumMemTags> run_peak_by_tag_{};
};

}  // namespace lb::train
