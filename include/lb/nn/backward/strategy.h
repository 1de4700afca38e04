// Pluggable backward for Linear (and, through im2col, Conv2d) layers.
//
// Every strategy works on one GEMM view of a layer call (docs/algorithms.md):
//   x (B, L, I), w (O, I), y = x wᵀ + b (B, L, O), g_y (B, L, O).
// Forward is always exact; the strategy decides what to keep for backward (save) and how to
// compute g_x = g_y w and g_w = Σ_b g_yᵀ x from it (backward). g_b = Σ g_y is always exact
// and computed by the caller. A strategy never touches the tape (the caller records the node
// with the state's tensors, so saved bytes are measured by autograd::saved_bytes()), never
// branches on device, and draws randomness only from Philox streams keyed by the step context
// it was given (context.h); what a call needs besides tensors comes in its CallContext.
//
// Every public entry is non-virtual (save, backward, save_conv, backward_conv): the base
// checks, routes (calibration, fallback, device) and accounts in the layer's record
// (layer_record.h: identity, mode, step, measured calls); strategies override the protected
// *_impl steps. A new strategy writes type(), hyperparams(), clone(), save_impl() and
// backward_impl() (the rest has defaults) and one line in the factory table (factory.cpp).
// Calibration is a separate interface (calibratable.h) for the strategies that calibrate; the
// gradient-fidelity probe wraps a strategy (probe.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/tensor.h"
#include "lb/nn/backward/calibratable.h"
#include "lb/nn/backward/context.h"
#include "lb/nn/backward/layer_record.h"
#include "lb/nn/backward/summary.h"
#include "lb/ops/conv.h"

namespace lb::nn::backward {

// What forward keeps for backward. `tensors` live on the tape (and are what saved_bytes
// counts); `scalars` carry small numbers (quantisation scales, flags).
struct SavedState {
  LayerGeometry geom;
  bool exact = false;  // tensors = {x}: backward is the exact one
  bool conv_image = false;  // with exact, for a conv: x is the image (N, C, H, W), not tokens
  bool token_view = false;  // a conv saved through the generic token view (see save_conv)
  std::vector<Tensor> tensors;
  std::vector<double> scalars;
  SequenceOffsets sequences;  // a padding-free call's sequences (null: not packed)
  StepContext step;           // the forward's step: the backward's random draws are keyed by it
  // A decorator's (probe.h) inner state: its tensors are this state's first `wrapped_tensors`.
  std::shared_ptr<const SavedState> wrapped;
  size_t wrapped_tensors = 0;
};

// A Conv2d call seen as a GEMM (lb/ops/conv.h).
using ConvGeometry = lb::ConvGeometry;
// im2col of a whole batch into the token layout (N, Ho·Wo, C·kH·kW), and its adjoint.
Tensor conv_to_tokens(const Tensor& x, const ConvGeometry& cg);
Tensor conv_from_tokens(const Tensor& tokens, const ConvGeometry& cg);  // sums overlaps (col2im)

struct Gradients {
  Tensor grad_input;   // (B, L, I), when asked for
  Tensor grad_weight;  // (O, I), when asked for
  // Optional (O): the exact Σ g_y, when the strategy summed it during its own pass over g_y
  // (saves the caller a second read of g_y); undefined means the caller sums.
  Tensor grad_bias;
};

// Tests only: while set, CPU convolutions take the token view a GPU takes (save_conv).
void set_conv_token_view_on_cpu(bool on);
bool conv_token_view_on_cpu();

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string type() const = 0;
  // Effective settings as JSON (round-trips through the factory).
  virtual nlohmann::json hyperparams() const = 0;
  // A fresh per-layer instance with the same settings (the factory builds a prototype per rule).
  virtual std::unique_ptr<Strategy> clone() const = 0;
  // Whether its Linear (or, with `conv`, its Conv2d) kernels run on the CPU only: then the
  // save refuses device tensors, naming the layer, instead of handing device memory to CPU
  // code.
  virtual bool cpu_only(bool /*conv*/) const { return false; }
  // The calibration side of this strategy, or null for one that never calibrates.
  virtual Calibratable* calibration() { return nullptr; }
  const Calibratable* calibration() const { return const_cast<Strategy*>(this)->calibration(); }

  // The layer it serves, its mode, its step and its measured calls.
  LayerRecord& record() { return record_; }
  const LayerRecord& record() const { return record_; }

  // Forward: x (B, L, I) contiguous, w (O, I). Exact-save during calibration. A call whose
  // context carries sequences is padding-free: x is (1, L, I) and its offsets end at L; its
  // geometry and state carry them.
  SavedState save(const Tensor& x, const Tensor& w, const CallContext& call = {});
  // Deferred save, the compressed strategies' exact lean (strategy_linear): where the tape
  // can give x back bit for bit (its producer keeps what makes it, kept_input.h), forward
  // only records the call (note_deferred_call: checks, geometry, nothing kept) and backward
  // recomputes x and runs save(x, w, call, /*deferred=*/true) then backward: the state is
  // computed from the same x at the same step, so the gradients are the same bit for bit,
  // and the layer keeps no bytes of its own. Not while calibrating (saves observe x then).
  bool can_defer_save() const { return !record_.calibrating; }
  void note_deferred_call(const Tensor& x, const Tensor& w, const CallContext& call);
  SavedState save(const Tensor& x, const Tensor& w, const CallContext& call, bool deferred);
  // A frozen weight needs only g_x = g_y w, which reads nothing of x. A strategy whose g_x
  // path is its own (HOT's Hadamard + INT4, INSTANT's projection of g_y) says so here and
  // runs it on frozen Linear layers too (LoRA's base layers); save_frozen records the call
  // (geometry, step) and keeps nothing (exact, i.e. g_y w, while calibrating, fallen back, or
  // where save_frozen_impl says so). Others leave frozen layers to the plain op.
  virtual bool compresses_gx() const { return false; }
  SavedState save_frozen(const Tensor& x, const Tensor& w, const CallContext& call = {});
  // Backward: g_y (B, L, O) contiguous. Times itself for the accounting.
  Gradients backward(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                     bool want_gw);
  // backward() on a state the caller gives up: an exact state's x is dropped once g_w is
  // computed, before g_x (the same products and numbers; one activation-sized tensor fewer
  // alive at once).
  Gradients backward_consuming(SavedState s, const Tensor& g_y, const Tensor& w, bool want_gx, bool want_gw);

  // Conv2d (groups = 1) through the same strategy. save_conv keeps the exact image once the
  // layer fell back; otherwise, on the CPU, what save_conv_impl keeps, and on another device
  // the token view (conv_to_tokens, then the Linear path), marked token_view, since the
  // strategies' image-layout kernels are CPU code: the one place a device decides a conv's
  // route. backward_conv takes g_y as the image gradient (N, O, Ho, Wo) and returns g_x as
  // the image gradient or as tokens (B, L, I) (strategy_conv2d folds those with col2im),
  // g_w as (O, I).
  SavedState save_conv(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg, const CallContext& call = {});
  Gradients backward_conv(const SavedState& s, const Tensor& g_y, const Tensor& w2d, bool want_gx, bool want_gw,
                          const ConvGeometry& cg);
  void check_device(const Tensor& x, bool conv) const;

  // ---- calibration (strategies with a calibration() side) ----
  // Puts the layer in calibration mode (exact saves, statistics observed) and ends it (the
  // new state computed). No-ops for a strategy without calibration.
  void begin_calibration();
  void finish_calibration();

  // Exact backward from a saved x (vanilla, the fallback of compressed strategies, the
  // probe's reference).
  static SavedState save_exact(const Tensor& x, const Tensor& w);
  // The exact save of a conv: the input image itself (never its kH·kW times larger im2col
  // view); backward_conv then runs the conv op's own backward (conv2d_grads).
  SavedState save_conv_exact(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg);
  static Gradients backward_exact(const SavedState& s, const Tensor& g_y, const Tensor& w,
                                  bool want_gx, bool want_gw);

  // ---- accounting ----
  // Paper metrics per sample for geometry g: backward GEMM FLOPs (a multiply-add = 2) and the
  // bytes of saved input in fp32 terms.
  virtual double paper_backward_flops(const LayerGeometry& g) const;
  virtual double paper_saved_bytes_fp32(const LayerGeometry& g) const;
  // On a frozen weight (LoRA's base): g_x only (g_y w: 2·L·I·O), nothing of x kept.
  virtual double paper_frozen_backward_flops(const LayerGeometry& g) const;
  // The metrics of the calls as they ran: frozen calls count their g_x path alone.
  double paper_backward_flops_as_run(const LayerGeometry& g) const {
    return record_.frozen ? paper_frozen_backward_flops(g) : paper_backward_flops(g);
  }
  double paper_saved_bytes_fp32_as_run(const LayerGeometry& g) const {
    return record_.frozen ? 0.0 : paper_saved_bytes_fp32(g);
  }
  // Ranks, quantiser choices, paper metrics for the last geometry seen, measured figures:
  // summary() typed (what generic code reads), report() as JSON: summary().to_json() plus
  // the settings and the strategy's own details under its own key.
  virtual StrategySummary summary() const;
  virtual nlohmann::json report() const;

  // The accounting counters of the run so far (backward calls and ms, calibration passes'
  // calls and ms; a strategy adds its own), saved with checkpoints so that a resumed run's
  // per-layer report covers the whole run, as its totals do. Errors name the layer.
  virtual nlohmann::json accounting_state() const;
  virtual void load_accounting_state(const nlohmann::json& j);

  // ---- learned state (checkpoints) ----
  // Per-layer decisions a strategy makes while training (e.g. HOT's LQS quantiser choice),
  // saved with checkpoints and restored before training resumes. Empty by default.
  virtual nlohmann::json state_json() const { return nlohmann::json::object(); }
  virtual void load_state_json(const nlohmann::json& /*j*/) {}

  // Identity used in reports and to key random streams; `conv` for a Conv2d layer.
  void set_layer(const std::string& name, int64_t id, bool conv = false) {
    record_.name = name;
    record_.id = id;
    record_.conv = conv;
  }

 protected:
  // The steps the public entries run. `call` as given to save / save_conv.
  virtual SavedState save_impl(const Tensor& x, const Tensor& w, const CallContext& call) = 0;
  virtual Gradients backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w,
                                  bool want_gx, bool want_gw) = 0;
  // A frozen call's state for geometry g (save_frozen stamps geometry and step): nothing
  // kept; `exact` where the strategy's g_x path cannot serve g (e.g. no calibrated basis).
  virtual SavedState save_frozen_impl(const LayerGeometry& /*g*/) { return {}; }
  // A conv on the CPU image path. The defaults run im2col then the Linear path; a strategy
  // may override them (e.g. to keep the raw input instead of its 9× larger im2col view).
  virtual SavedState save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg,
                                    const CallContext& call);
  // g_y as the image gradient (N, O, Ho, Wo). The default runs the exact conv backward for an
  // exact image state, else transposes g_y to tokens and calls backward_conv_tokens_impl; a
  // strategy that can work on the image layout overrides this to skip that copy.
  virtual Gradients backward_conv_image_impl(const SavedState& s, const Tensor& g_y, const Tensor& w2d,
                                             bool want_gx, bool want_gw, const ConvGeometry& cg);
  // g_y as tokens (B, L, O); returns g_x as tokens (B, L, I) or as the image gradient (a 4-D
  // grad_input, e.g. to fold col2im into a per-image loop without the (B, L, I) buffer).
  virtual Gradients backward_conv_tokens_impl(const SavedState& s, const Tensor& g_y_tokens, const Tensor& w2d,
                                              bool want_gx, bool want_gw, const ConvGeometry& cg);

  LayerRecord record_;
  void note_call(const Tensor& x, const Tensor& w, const CallContext& call);
};

// y = x wᵀ + b for x (..., I) through `strategy` (exact forward; backward by the strategy).
// x's leading dims are viewed as (B, L): (B, L, I) stays, (N, I) becomes B = N, L = 1.
// Records one node on the tape holding the state's tensors.
Tensor strategy_linear(const Tensor& x, const Tensor& w, const Tensor& b,
                       const std::shared_ptr<Strategy>& strategy, const CallContext& call = {});
// Conv2d through `strategy` (groups > 1 stays the exact op: docs/algorithms.md).
Tensor strategy_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args,
                       const std::shared_ptr<Strategy>& strategy, const CallContext& call = {});

}  // namespace lb::nn::backward
