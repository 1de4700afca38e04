// One optimizer step, the one `train`, every `bench` model workload, calibration passes and the
// gradient probe run: forward with the loss over the step's micro-batches (each loss weighted
// by its share of the global batch, so k micro-batches of B equal one batch of k·B), backward
// (gradients accumulate in .grad), the data-parallel gradient all-reduce, clipping, the
// optimizer step, and the step's accounting (phase times, bytes kept for backward).
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lb/autograd/row_sparse_grad.h"
#include "lb/autograd/saved_codec.h"
#include "lb/core/allocator.h"
#include "lb/core/device.h"
#include "lb/core/error.h"
#include "lb/core/tensor.h"
#include "lb/dist/process_group.h"
#include "lb/nn/backward/strategy.h"
#include "lb/nn/module.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"

namespace lb::train {

class GradientSync;

// A run that diverged: its loss, gradients or weights became NaN or inf. The message names
// the step (and, from the trainer, the last good checkpoint: none is written from
// non-finite state).
class Diverged : public Error {
 public:
  explicit Diverged(const std::string& msg) : Error(msg) {}
};

// A micro-batch as the step sees it: its example count (0: this rank's part of a short last
// batch is empty, and it is skipped) and its forward pass, which returns the mean loss.
struct MicroBatch {
  int64_t examples = 0;
  std::function<Tensor()> loss;
};

struct TrainStepOptions {
  // Clipping of the global gradient norm (torch.nn.utils.clip_grad_norm_). Set: the norm is
  // computed every step, reported and checked for NaN/inf, and clipped when the value is > 0.
  // Unset (bench): no norm is computed.
  std::optional<double> max_grad_norm;
  const optim::LrSchedule* schedule = nullptr;  // the rate factor of each step (none: unchanged)
  // Data-parallel (group of more than one rank): the example count and the loss are summed
  // over ranks and `sync` all-reduces the gradients, overlapped with the last backward pass.
  dist::ProcessGroup* group = nullptr;
  GradientSync* sync = nullptr;  // (or TrainStep::set_gradient_sync)
  // Wait for the device at the end of each phase, so the phase times are the device's (bench
  // on a GPU). Otherwise only reading the loss waits.
  bool synchronize = false;
  Device device = Device::cpu();
  // The layers' backward strategies: the papers' accounting of the step, and the layer named
  // when a gradient is not finite. The step gives them its step context (their random draws).
  std::vector<std::shared_ptr<nn::backward::Strategy>> strategies;
  // The seed of the strategies' random streams (HOT's stochastic rounding) and the codecs'.
  uint64_t seed = 0;
  // Kept-tensor codecs (config memory.codecs; null or empty: none). The first run() checks
  // that every rule decided some kept tensor, and names the one that did not.
  std::shared_ptr<const autograd::CodecRules> codecs;
  // The optimizer step fused into backward (config optimizer.in_backward): in the step's last
  // backward pass, each parameter is updated as soon as its gradient is complete and the
  // gradient freed, so the gradients of the whole model never exist at once. The micro-batches
  // before the last accumulate as usual. Global-norm clipping cannot wait for the whole norm
  // there: each gradient is scaled by max_grad_norm / (the previous step's norm + 1e-6) when
  // that is below 1 (the first step: unclipped); the norm reported is the step's own, before
  // scaling. One rank only. An embedding's weight gradient (the word embedding's: at most
  // B x T of its rows) is handed to the optimizer as those rows only (lb/autograd/
  // row_sparse_grad.h), never built dense, on every micro-batch of the step; the update is
  // the dense one's, bit for bit.
  bool optimizer_in_backward = false;
  double previous_grad_norm = 0;  // what the first step's fused clipping scales by (a resumed run's last)
};

struct StepResult {
  double loss = 0;          // the global batch's mean loss
  double grad_norm = 0;     // before clipping (0 when max_grad_norm is unset)
  double lr = 0;            // the first parameter group's rate this step used
  int64_t examples = 0;     // in the global batch
  double forward_ms = 0, backward_ms = 0, sync_ms = 0, optimizer_ms = 0;
  // autograd::saved_bytes() after the first micro-batch's forward (-1: not measured), and the
  // papers' per-example backward FLOPs and fp32 bytes at that micro-batch's geometry.
  int64_t saved_bytes = -1;
  double paper_flops_per_example = 0, paper_saved_bytes_per_example = 0;
  // The step's activation peak (lb/core/allocator.h: all bytes but parameters, buffers,
  // gradients and optimizer state) on its device, and each tag's bytes at that moment.
  int64_t activation_peak_bytes = 0;
  std::array<int64_t, kNumMemTags> at_activation_peak{};
  // Every byte's peak over the step (parameters, gradients and optimizer state included).
  int64_t step_peak_bytes = 0;
};

class TrainStep {
 public:
  TrainStep(nn::Module& module, optim::Optimizer& optimizer, TrainStepOptions options);

  // Optimizer step number `step` (0-based; messages name step + 1) on these micro-batches:
  // forward, backward, all-reduce, clipping, optimizer step, zero_grad. measure_saved: read
  // the bytes kept for backward after the first forward (a walk of the live graph, untimed).
  // Throws Diverged on a non-finite loss or gradient norm.
  StepResult run(int64_t step, const std::vector<MicroBatch>& micro, bool measure_saved);

  // Makes `step` the key of the strategies' random draws in the passes that follow
  // (calibration and probe passes before the step; run() calls it too).
  void begin_step(int64_t step) { context_->step = step; }

  // Forward and backward of the weighted micro-batches only: gradients accumulate, nothing is
  // stepped or checked (calibration passes, the gradient probe). `what` names the pass in a
  // failed collective. with_codecs = false: the kept tensors stay as they are and blocks
  // recompute exactly (the probe's exact reference pass).
  void accumulate(const std::vector<MicroBatch>& micro, const std::string& what, bool with_codecs = true);
  // Whether the kept-tensor codecs are on (config memory.codecs).
  bool has_codecs() const { return opt_.codecs && !opt_.codecs->rules().empty(); }

  // Other kept-tensor codecs from the next step on (a memory plan for another batch length);
  // their rules are checked after the first step that runs them, as the constructor's are.
  void set_codecs(std::shared_ptr<const autograd::CodecRules> codecs) {
    opt_.codecs = std::move(codecs);
    codecs_checked_ = false;
  }

  // Data-parallel: the gradients' all-reduce (built on trainable(), hence set afterwards).
  void set_gradient_sync(GradientSync* sync) { opt_.sync = sync; }

  const std::vector<Tensor>& trainable() const { return trainable_; }
  nn::Module& module() { return module_; }
  optim::Optimizer& optimizer() { return optimizer_; }

 private:
  int64_t global_examples(const std::vector<MicroBatch>& micro, const std::string& what);
  void wait_for_device() const;
  std::string first_bad_gradient();
  void check_codec_rules() const;
  void backward_with_fused_update(const Tensor& loss, const std::string& at, StepResult& r);
  // Row-sparse gradients of this fused step not applied yet, by leaf (accumulated over its
  // micro-batches).
  std::unordered_map<const TensorImpl*, autograd::RowSparseGrad> pending_rows_;

  nn::Module& module_;
  optim::Optimizer& optimizer_;
  TrainStepOptions opt_;
  std::vector<Tensor> trainable_;
  std::shared_ptr<nn::backward::StepContext> context_;
  bool codecs_checked_ = false;
  double previous_grad_norm_;  // the last step's, for the fused step's clipping
};

}  // namespace lb::train
