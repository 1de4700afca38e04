// The gradient-fidelity probe (train.grad_probe_every) as a decorator: a ProbedStrategy wraps a
// layer's strategy for two probe passes. In the comparing pass its save keeps the inner
// strategy's state and the exact input beside it; its backward runs both backwards from the
// same g_y, records how close the strategy's g_x and g_w are to the exact ones, and passes the
// exact gradients on, so every layer is measured against the exact g_y; it also holds each
// call's exact g_x. In the second pass (set_comparing(false)) calls pass the strategy's own
// gradients on, and their g_x is compared with the first pass's, call by call (end to end). The inner strategy draws from its own probe stream
// (StepContext::stream) while wrapped, so probing never shifts the training run's draws, and
// its measured figures (calls, times, last geometry) are put back when the probe ends.
#pragma once
#include <memory>
#include <vector>

#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

// Adds <e, a>, |e|², |a|², |e - a|² (f64 sums) of two same-size tensors (undefined tensors
// add nothing).
void add_closeness(const Tensor& e, const Tensor& a, double& dot, double& ee, double& aa, double& dd);

struct ProbeStats {
  int64_t calls = 0;
  // Σ over calls of <exact, approx>, |exact|², |approx|², |exact - approx|²
  double gw_dot = 0, gw_ee = 0, gw_aa = 0, gw_dd = 0;
  double gx_dot = 0, gx_ee = 0, gx_aa = 0, gx_dd = 0;
  // End to end (second pass against the first): g_x
  double e2e_gx_dot = 0, e2e_gx_ee = 0, e2e_gx_aa = 0, e2e_gx_dd = 0;
};

class ProbedStrategy : public Strategy {
 public:
  // Wraps `inner` (which keeps its layer identity); from now until end() it draws from the
  // probe stream of its current step.
  explicit ProbedStrategy(std::shared_ptr<Strategy> inner);
  ~ProbedStrategy() override { end(); }
  // Gives the inner strategy its step context and measured figures back (idempotent).
  void end();

  std::string type() const override { return inner_->type(); }
  nlohmann::json hyperparams() const override { return inner_->hyperparams(); }
  std::unique_ptr<Strategy> clone() const override;
  bool cpu_only(bool conv) const override { return inner_->cpu_only(conv); }
  const std::shared_ptr<Strategy>& inner() const { return inner_; }
  // Calls compared so far (0: the layer ran exactly, e.g. not calibrated yet or fell back).
  const ProbeStats& stats() const { return stats_; }
  // Off: calls pass the strategy's own gradients on (still on the probe stream); their g_x
  // is compared with the comparing pass's exact g_x of the same call.
  void set_comparing(bool on) {
    comparing_ = on;
    call_ = 0;
  }

 protected:
  SavedState save_impl(const Tensor& x, const Tensor& w, const CallContext& call) override;
  Gradients backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                          bool want_gw) override;
  SavedState save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg,
                            const CallContext& call) override;
  Gradients backward_conv_image_impl(const SavedState& s, const Tensor& g_y, const Tensor& w2d, bool want_gx,
                                     bool want_gw, const ConvGeometry& cg) override;

 private:
  // Whether the inner strategy runs its own (compressed) backward this call.
  bool compares() const { return comparing_ && !inner_->record().fell_back && !inner_->record().calibrating; }
  // The state with `inner`'s tensors first and `exact`'s after them.
  static SavedState wrap(SavedState inner, SavedState exact);
  static SavedState inner_state(const SavedState& s);
  void record(const Gradients& exact, const Gradients& approx);
  // The comparing pass's g_x for this call, or the second pass's compared with it.
  void end_to_end(const Tensor& g_x);

  std::shared_ptr<Strategy> inner_;
  std::shared_ptr<const StepContext> inner_context_;
  LayerRecord::Measured inner_measured_;
  bool ended_ = false;
  bool comparing_ = true;
  ProbeStats stats_;
  std::vector<Tensor> exact_gx_;  // per call of the comparing pass
  size_t call_ = 0;               // calls of the second pass so far
};

}  // namespace lb::nn::backward
