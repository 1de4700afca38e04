// Pluggable backward for Linear (and, through im2col, Conv2d) layers.
//
// Every strategy works on one GEMM view of a layer call (ALGORITHMS.md):
//   x (B, L, I), w (O, I), y = x wᵀ + b (B, L, O), g_y (B, L, O).
// Forward is always exact; the strategy decides what to keep for backward (save) and how to
// compute g_x = g_y w and g_w = Σ_b g_yᵀ x from it (backward). g_b = Σ g_y is always exact
// and computed by the caller. A strategy never touches the tape (the caller records the node
// with the state's tensors, so saved bytes are measured by autograd::saved_bytes()), never
// branches on device, and draws randomness only from Philox streams keyed by run_context().
//
// Calibration (INSTANT): a training loop asks needs_calibration(step); if any layer needs it,
// it calls begin_calibration(), runs extra forward/backward passes without an optimizer step
// (layers then save exactly and feed observe_input / observe_grad_output), and calls
// finish_calibration(). See nn/backward/calibration.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/dist/process_group.h"
#include "lb/core/tensor.h"
#include "lb/nn/backward/packed_sequences.h"
#include "lb/ops/conv.h"

namespace lb::nn::backward {

struct LayerGeometry {
  int64_t B = 0, L = 0, I = 0, O = 0;
  // A padding-free call (packed_sequences.h): B = 1 and its L tokens are `sequences`
  // sequences back to back, the longest of them `longest` tokens. 0: not packed.
  int64_t sequences = 0, longest = 0;
  // Elements per sample the exact backward keeps: 0 means L·I (the token view, a Linear's
  // x); a convolution keeps its image, C·H·W, k² times less than its im2col tokens.
  int64_t exact_saved = 0;
};

// What forward keeps for backward. `tensors` live on the tape (and are what saved_bytes
// counts); `scalars` carry small numbers (quantisation scales, flags).
struct SavedState {
  LayerGeometry geom;
  bool exact = false;  // tensors = {x}: backward is the exact one
  bool conv_image = false;  // with exact, for a conv: x is the image (N, C, H, W), not tokens
  bool token_view = false;  // a conv saved through the generic token view (save_conv_checked)
  std::vector<Tensor> tensors;
  std::vector<double> scalars;
  SequenceOffsets sequences;  // a padding-free call's sequences (null: not packed)
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

// Seed and optimizer step for keying random streams (Philox subsequence/offset), set by the
// training loop before each step.
struct RunContext {
  uint64_t seed = 0;
  int64_t step = 0;
};
RunContext& run_context();

// Tests only: while set, CPU convolutions take the token view a GPU takes (save_conv_checked).
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

  // Forward: x (B, L, I) contiguous, w (O, I). Exact-save during calibration. Inside a
  // PackedSequencesScope whose offsets end at L, a (1, L, I) x is a padding-free call: its
  // geometry and state carry the sequences.
  SavedState save(const Tensor& x, const Tensor& w);
  // Backward: g_y (B, L, O) contiguous. Times itself for the accounting.
  Gradients backward(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                     bool want_gw);

  // Conv2d (groups = 1) through the same strategy: forward keeps what save_conv returns, and
  // backward_conv gets g_y as tokens (B, L, O) and returns g_x as tokens (B, L, I) plus
  // g_w (O, I); it may instead return g_x already as the image gradient (N, C, H, W) (a 4-D
  // grad_input), e.g. to fold col2im into a per-image loop without the (B, L, I) buffer.
  // The defaults run im2col then save/backward; a strategy may override them
  // (e.g. to keep the raw input instead of its 9× larger im2col view).
  virtual SavedState save_conv(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg);
  // The entry point strategy_conv2d calls, with g_y as the image gradient (N, O, Ho, Wo).
  // The default transposes it to tokens and calls backward_conv; a strategy that can work on
  // the image layout overrides this to skip that copy.
  virtual Gradients backward_conv_image(const SavedState& s, const Tensor& g_y, const Tensor& w2d,
                                        bool want_gx, bool want_gw, const ConvGeometry& cg);
  virtual Gradients backward_conv(const SavedState& s, const Tensor& g_y_tokens,
                                  const Tensor& w2d, bool want_gx, bool want_gw,
                                  const ConvGeometry& cg);

  // ---- calibration hooks (no-ops for strategies that need none) ----
  virtual bool needs_calibration(int64_t /*step*/) const { return false; }
  // Forward/backward passes the loop should run when needs_calibration() is true (INSTANT's
  // N_c; one pass for a strategy that only inspects a first batch, like HOT's LQS).
  virtual int64_t calibration_batches() const { return 1; }
  void begin_calibration();
  void finish_calibration();
  bool calibrating() const { return calibrating_; }
  // Data-parallel calibration (Calibrator::set_group): before finish_calibration(), sums this
  // rank's statistics with the other ranks' so finishing sees the global batches. A strategy
  // whose new state follows from the summed statistics alone returns true from
  // reduces_calibration() (every rank then computes the same state); the others get rank 0's
  // state after finishing.
  virtual void reduce_calibration(dist::ProcessGroup& /*group*/) {}
  virtual bool reduces_calibration() const { return false; }

  // ---- variable sequence lengths ----
  // Text batches padded to their own longest example (data.padding "dynamic") have different
  // token counts L; the training loop gives the most any batch can have. A strategy whose
  // state is sized by L (INSTANT's token-axis bases) sizes it by this instead. 0: fixed L.
  virtual void set_max_tokens(int64_t /*max_L*/) {}

  // ---- failure fallback ----
  // After a failed calibration (e.g. the eigendecomposition did not converge, or saw NaN)
  // the layer runs the exact backward for the rest of the run; `why` is kept for reports
  // and checkpoints.
  void fall_back_to_exact(const std::string& why) {
    fell_back_ = true;
    fallback_reason_ = why;
  }
  bool fell_back() const { return fell_back_; }
  const std::string& fallback_reason() const { return fallback_reason_; }
  // The conv save strategy_conv2d uses: the exact image save once the layer fell back. The
  // strategies' image-layout convolution kernels (their save_conv / backward_conv_image
  // overrides) are CPU code; on another device every strategy takes the token view (the
  // base save_conv: conv_to_tokens, then its Linear path), marked token_view so the backward
  // takes the base route too. This is the one place a device decides a conv's route.
  SavedState save_conv_checked(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg) {
    check_device(x, /*conv=*/true);
    if (fell_back_) return save_conv_exact(x, w2d, cg);
    if (x.device().is_cpu() && !conv_token_view_on_cpu()) return save_conv(x, w2d, cg);
    SavedState s = Strategy::save_conv(x, w2d, cg);
    s.token_view = true;
    return s;
  }
  // The matching backward: backward_conv_image, or the base's for a token-view state.
  Gradients backward_conv_checked(const SavedState& s, const Tensor& g_y, const Tensor& w2d, bool want_gx,
                                  bool want_gw, const ConvGeometry& cg) {
    return s.token_view ? Strategy::backward_conv_image(s, g_y, w2d, want_gx, want_gw, cg)
                        : backward_conv_image(s, g_y, w2d, want_gx, want_gw, cg);
  }
  void check_device(const Tensor& x, bool conv) const;

  // ---- gradient-fidelity probe (train.grad_probe_every) ----
  // While probing, strategy_linear / strategy_conv2d keep the exact input next to the
  // strategy's state, run both backwards from the same g_y, record how close the strategy's
  // g_x and g_w are to the exact ones (record_probe), and pass the exact gradients on, so
  // every layer is measured against the exact g_y. Probe calls are not counted as backward
  // calls.
  struct ProbeStats {
    int64_t calls = 0;
    // Σ over calls of <exact, approx>, |exact|², |approx|², |exact - approx|²
    double gw_dot = 0, gw_ee = 0, gw_aa = 0, gw_dd = 0;
    double gx_dot = 0, gx_ee = 0, gx_aa = 0, gx_dd = 0;
  };
  void set_probing(bool on) {
    probing_ = on;
    if (on) probe_ = {};
  }
  bool probing() const { return probing_ && !calibrating_ && !fell_back_; }
  // exact/approx grad_input and grad_weight, in any matching layout (undefined: not asked).
  void record_probe(const Gradients& exact, const Gradients& approx);
  const ProbeStats& probe_stats() const { return probe_; }

  // Exact backward from a saved x (vanilla, the fallback of compressed strategies, the
  // probe's reference).
  static SavedState save_exact(const Tensor& x, const Tensor& w);
  // The exact save of a conv: the input image itself (never its kH·kW times larger im2col
  // view); backward_conv_image then runs the conv op's own backward (conv2d_grads).
  SavedState save_conv_exact(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg);
  static Gradients backward_exact(const SavedState& s, const Tensor& g_y, const Tensor& w,
                                  bool want_gx, bool want_gw);

  // ---- accounting ----
  // Paper metrics per sample for geometry g: backward GEMM FLOPs (a multiply-add = 2) and the
  // bytes of saved input in fp32 terms.
  virtual double paper_backward_flops(const LayerGeometry& g) const;
  virtual double paper_saved_bytes_fp32(const LayerGeometry& g) const;
  // The geometry of the last call that saved for backward (B samples of L tokens).
  const LayerGeometry& last_geometry() const { return last_geom_; }
  // Ranks, quantiser choices, paper metrics for the last geometry seen, measured figures.
  virtual nlohmann::json report() const;

  // ---- learned state (checkpoints) ----
  // Per-layer decisions a strategy makes while training (e.g. HOT's LQS quantiser choice),
  // saved with checkpoints and restored before training resumes. Empty by default.
  virtual nlohmann::json state_json() const { return nlohmann::json::object(); }
  virtual void load_state_json(const nlohmann::json& /*j*/) {}

  // Identity used in reports and to key random streams; `conv` for a Conv2d layer.
  void set_layer(const std::string& name, int64_t id, bool conv = false) {
    layer_name_ = name;
    layer_id_ = id;
    conv_ = conv;
  }
  const std::string& layer_name() const { return layer_name_; }
  int64_t layer_id() const { return layer_id_; }
  bool on_conv() const { return conv_; }

 protected:
  virtual SavedState save_impl(const Tensor& x, const Tensor& w) = 0;
  virtual Gradients backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w,
                                  bool want_gx, bool want_gw) = 0;
  // Calibration statistics of one call; `sequences` as in SavedState (null: not packed).
  virtual void observe_input(const Tensor& /*x*/, const SequenceOffsets& /*sequences*/) {}
  virtual void observe_grad_output(const Tensor& /*g_y*/, const SequenceOffsets& /*sequences*/) {}
  virtual void begin_calibration_impl() {}
  virtual void finish_calibration_impl() {}

  // Counts one training backward call of `ms` milliseconds (not while probing: its cost is
  // reported apart).
  void count_backward(double ms) {
    if (probing_) return;
    ++calls_;
    backward_ms_ += ms;
  }

  std::string layer_name_;
  int64_t layer_id_ = 0;
  bool conv_ = false;
  bool calibrating_ = false;
  bool fell_back_ = false;
  bool probing_ = false;
  ProbeStats probe_;
  std::string fallback_reason_;
  // Measured: calls, total backward milliseconds, last geometry and saved bytes. Backward
  // calls made while calibrating are counted apart (they are calibration cost).
  int64_t calls_ = 0;
  double backward_ms_ = 0;
  int64_t calib_calls_ = 0;
  double calib_backward_ms_ = 0;
  LayerGeometry last_geom_;
  int64_t last_saved_bytes_ = 0;
};

// Adds <e, a>, |e|², |a|², |e - a|² (f64 sums) of two same-size tensors (the probe's
// closeness figures; undefined tensors add nothing).
void add_closeness(const Tensor& e, const Tensor& a, double& dot, double& ee, double& aa, double& dd);

// y = x wᵀ + b for x (..., I) through `strategy` (exact forward; backward by the strategy).
// x's leading dims are viewed as (B, L): (B, L, I) stays, (N, I) becomes B = N, L = 1.
// Records one node on the tape holding the state's tensors.
Tensor strategy_linear(const Tensor& x, const Tensor& w, const Tensor& b,
                       const std::shared_ptr<Strategy>& strategy);
// Conv2d through `strategy` (groups > 1 stays the exact op: ALGORITHMS.md).
Tensor strategy_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args,
                       const std::shared_ptr<Strategy>& strategy);

}  // namespace lb::nn::backward
