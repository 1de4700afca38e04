// Strategy base: calibration switch, timing/accounting, the exact path, and the
// strategy-driven linear op that records one tape node per call.
#include "lb/nn/backward/strategy.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>

#include "lb/autograd/kept_input.h"
#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/json_reader.h"
#include "lb/ops/linalg.h"
#include "lb/ops/reduce.h"

namespace lb::nn::backward {

namespace {
std::atomic<bool> g_conv_token_view_on_cpu{false};
}  // namespace
void set_conv_token_view_on_cpu(bool on) { g_conv_token_view_on_cpu = on; }
bool conv_token_view_on_cpu() { return g_conv_token_view_on_cpu; }

const StepContext& LayerRecord::step() const {
  static const StepContext unset;
  return step_context ? *step_context : unset;
}

void Strategy::check_device(const Tensor& x, bool conv) const {
  LB_CHECK(x.device().is_cpu() || !cpu_only(conv), "backward strategy '", type(), "' (", record_.name,
           "): its ", conv ? "Conv2d" : "Linear", " kernels run on the CPU only so far, and x is on ",
           x.device().str(), ". HINT: the vanilla strategy runs on CUDA");
}

void Strategy::note_call(const Tensor& x, const Tensor& w, const CallContext& call) {
  check_device(x, /*conv=*/false);
  LB_CHECK(x.dim() == 3 && w.dim() == 2 && x.size(2) == w.size(1), "backward strategy '", type(),
           "' (", record_.name, "): x must be (B, L, I) and w (O, I), got ", shape_str(x.shape()),
           " and ", shape_str(w.shape()));
  record_.measured.last_geom = {x.size(0), x.size(1), x.size(2), w.size(0)};
  if (const SequenceOffsets& packed = call.sequences) {
    LB_CHECK(x.size(0) == 1 && !packed->empty() && packed->front() == 0 && packed->back() == x.size(1),
             "backward strategy '", type(), "' (", record_.name, "): a padding-free call needs x (1, N, I) with ",
             "sequence offsets from 0 to N; got x ", shape_str(x.shape()), " and ", packed->size(), " offsets");
    record_.measured.last_geom.sequences = static_cast<int64_t>(packed->size()) - 1;
    for (size_t b = 1; b < packed->size(); ++b) {
      LB_CHECK((*packed)[b] >= (*packed)[b - 1], "backward strategy '", type(), "' (", record_.name,
               "): sequence offsets must not decrease");
      record_.measured.last_geom.longest = std::max(record_.measured.last_geom.longest, (*packed)[b] - (*packed)[b - 1]);
    }
  }
}

void Strategy::note_deferred_call(const Tensor& x, const Tensor& w, const CallContext& call) {
  note_call(x, w, call);
  record_.measured.last_saved_bytes = 0;  // the tape's producer keeps what gives x back
}

SavedState Strategy::save(const Tensor& x, const Tensor& w, const CallContext& call) {
  return save(x, w, call, /*deferred=*/false);
}

SavedState Strategy::save_frozen(const Tensor& x, const Tensor& w, const CallContext& call) {
  note_call(x, w, call);
  record_.measured.last_saved_bytes = 0;
  record_.frozen = true;
  SavedState s;
  if (record_.calibrating || record_.fell_back)
    s.exact = true;  // g_y w (observed by a calibration)
  else
    s = save_frozen_impl(record_.measured.last_geom);
  s.tensors.clear();  // nothing of x, ever
  s.geom = record_.measured.last_geom;
  s.sequences = call.sequences;
  s.step = record_.step();
  return s;
}

SavedState Strategy::save(const Tensor& x, const Tensor& w, const CallContext& call, bool deferred) {
  note_call(x, w, call);
  auto stamp = [&](SavedState s) {
    s.geom = record_.measured.last_geom;
    s.sequences = call.sequences;
    s.step = record_.step();
    return s;
  };
  if (record_.calibrating) {
    if (Calibratable* c = calibration()) c->observe_input(x, call.sequences);
    return stamp(save_exact(x, w));
  }
  if (record_.fell_back) return stamp(save_exact(x, w));
  SavedState s = stamp(save_impl(x, w, call));
  if (deferred) return s;  // held during this backward only
  int64_t bytes = 0;
  for (const Tensor& t : s.tensors)
    if (t.defined()) bytes += static_cast<int64_t>(t.nbytes());
  record_.measured.last_saved_bytes = bytes;
  return s;
}

Gradients Strategy::backward(const SavedState& s, const Tensor& g_y, const Tensor& w,
                             bool want_gx, bool want_gw) {
  const auto t0 = std::chrono::steady_clock::now();
  Gradients g;
  if (s.exact) {  // calibration passes, degenerate fallbacks, and vanilla itself
    if (record_.calibrating)
      if (Calibratable* c = calibration()) c->observe_grad_output(g_y, s.sequences, s.step);
    g = backward_exact(s, g_y, w, want_gx, want_gw);
  } else {
    g = backward_impl(s, g_y, w, want_gx, want_gw);
  }
  record_.count_backward(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return g;
}

Gradients Strategy::backward_consuming(SavedState s, const Tensor& g_y, const Tensor& w, bool want_gx,
                                       bool want_gw) {
  if (!s.exact || !want_gx || !want_gw || record_.calibrating) return backward(s, g_y, w, want_gx, want_gw);
  const auto t0 = std::chrono::steady_clock::now();
  Gradients g = backward_exact(s, g_y, w, false, true);
  s.tensors.clear();  // g_x = g_y w reads no x
  g.grad_input = backward_exact(s, g_y, w, true, false).grad_input;
  record_.count_backward(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return g;
}

void Strategy::begin_calibration() {
  Calibratable* c = calibration();
  if (!c) return;
  record_.calibrating = true;
  record_.calib_calls_at_begin = record_.measured.calib_calls;
  c->on_calibration_begin();
}

void Strategy::finish_calibration() {
  if (!record_.calibrating) return;
  record_.calibrating = false;
  calibration()->on_calibration_end();
}

double Strategy::paper_backward_flops(const LayerGeometry& g) const {
  return 4.0 * static_cast<double>(g.L) * static_cast<double>(g.I) * static_cast<double>(g.O);
}

double Strategy::paper_frozen_backward_flops(const LayerGeometry& g) const {
  return 2.0 * static_cast<double>(g.L) * static_cast<double>(g.I) * static_cast<double>(g.O);
}

double Strategy::paper_saved_bytes_fp32(const LayerGeometry& g) const {
  return 4.0 * static_cast<double>(g.L) * static_cast<double>(g.I);
}

StrategySummary Strategy::summary() const {
  StrategySummary s;
  s.layer = record_.name;
  s.type = type();
  s.conv = record_.conv;
  if (record_.fell_back) s.fallback_reason = record_.fallback_reason;
  s.geometry = {record_.measured.last_geom.B, record_.measured.last_geom.L, record_.measured.last_geom.I, record_.measured.last_geom.O, record_.measured.last_geom.sequences, record_.measured.last_geom.longest};
  s.paper = {paper_backward_flops_as_run(record_.measured.last_geom), paper_saved_bytes_fp32_as_run(record_.measured.last_geom)};
  s.measured = {record_.measured.calls, record_.measured.backward_ms, record_.measured.last_saved_bytes, record_.measured.calib_calls, record_.measured.calib_backward_ms};
  return s;  // exact: not compressing (strategies that compress say so)
}

nlohmann::json Strategy::accounting_state() const {
  return {{"backward_calls", record_.measured.calls},
          {"backward_ms", record_.measured.backward_ms},
          {"calibration_backward_calls", record_.measured.calib_calls},
          {"calibration_backward_ms", record_.measured.calib_backward_ms}};
}

void Strategy::load_accounting_state(const nlohmann::json& j) {
  JsonReader r(j, "accounting (" + record_.name + ")");
  constexpr int64_t kMany = int64_t{1} << 62;
  record_.measured.calls = r.integer("backward_calls", 0, 0, kMany);
  record_.measured.backward_ms = r.number("backward_ms", 0, 0, 1e300);
  record_.measured.calib_calls = r.integer("calibration_backward_calls", 0, 0, kMany);
  record_.measured.calib_backward_ms = r.number("calibration_backward_ms", 0, 0, 1e300);  // a strategy's own keys: its override
}

nlohmann::json Strategy::report() const {
  nlohmann::json j = summary().to_json();
  j["hyperparams"] = hyperparams();
  return j;
}

SavedState Strategy::save_exact(const Tensor& x, const Tensor& w) {
  SavedState s;
  s.geom = {x.size(0), x.size(1), x.size(2), w.size(0)};
  s.tensors = {autograd::keep_product_operand(x)};  // bf16 under bf16 products (exact)
  s.exact = true;
  return s;
}

Gradients Strategy::backward_exact(const SavedState& s, const Tensor& g_y, const Tensor& w,
                                   bool want_gx, bool want_gw) {
  const int64_t B = s.geom.B, L = s.geom.L, I = s.geom.I, O = s.geom.O;
  Gradients g;
  if (want_gx) g.grad_input = matmul(g_y, w);  // (B, L, O)(O, I)
  if (want_gw)  // Σ_b g_yᵀ x: the batch folds into the contraction
    g.grad_weight = matmul(g_y.reshape({B * L, O}), autograd::saved_f32(s.tensors.at(0)).reshape({B * L, I}),
                           true, false);
  return g;
}

namespace {

// Where a linear node's backward gets its state: from the node's saved tensors (all but the
// last, the weight), which it may release as it reads them. The state kept at forward, the
// state made again from x recomputed (a deferred save), or a frozen call's.
using StateSource = std::function<SavedState(std::vector<Tensor>& saved)>;

// The one tape node of a strategy's linear call: y = x wᵀ + b, whose backward takes the state
// from `source`, then g_x and g_w from the strategy and g_b from g_y (the strategy's own sum
// when it streamed g_y anyway). `saved`: the state's tensors, then the weight (or an
// undefined tensor where g_x is not needed).
void record_linear(const std::string& name, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                   std::vector<Tensor> saved, StateSource source, const std::shared_ptr<Strategy>& strategy,
                   int64_t B, int64_t L) {
  autograd::record(name, y, {x, w, b}, std::move(saved),
                   [strategy, source = std::move(source), x_shape = x.shape(), B, L](
                       const Tensor& g, std::vector<Tensor>& s, const std::vector<bool>& need) mutable {
                     SavedState st = source(s);  // before g's view: a recomputed x is dropped sooner
                     const Tensor g3 = g.contiguous().view({B, L, g.size(-1)});
                     Gradients gr;
                     if (need[0] || need[1])
                       gr = strategy->backward_consuming(std::move(st), g3, s.back(), need[0], need[1]);
                     Tensor gb = need[2] ? (gr.grad_bias.defined() ? gr.grad_bias : sum(g3, {0, 1})) : Tensor();
                     return std::vector<Tensor>{need[0] ? gr.grad_input.reshape(x_shape) : Tensor(),
                                                need[1] ? gr.grad_weight : Tensor(), gb};
                   });
}

}  // namespace

Tensor strategy_linear(const Tensor& x, const Tensor& w, const Tensor& b,
                       const std::shared_ptr<Strategy>& strategy, const CallContext& call) {
  LB_CHECK(strategy != nullptr, "strategy_linear: no strategy");
  // The plain op where nothing is recorded, and for a frozen weight (no g_w, so nothing of x is
  // kept: the plain op saves only w) unless the strategy runs its own g_x path from g_y and w
  // (compresses_gx). Decided before the forward product, which is computed once either way.
  if (!autograd::should_record({x, w, b}) ||
      (!w.requires_grad() && (!strategy->compresses_gx() || !x.requires_grad())))
    return linear(x, w, b);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = linear(x, w, b);  // exact forward (checks shapes and dtypes)
  }
  const int64_t I = w.size(1);
  const int64_t L = x.dim() >= 3 ? x.size(-2) : 1;
  const int64_t B = x.numel() / (L * I);
  const Tensor x3 = x.detach().contiguous().view({B, L, I});
  const std::string name = "linear[" + strategy->type() + "]";
  if (!w.requires_grad()) {  // a frozen weight: g_x only, nothing of x kept
    SavedState state = strategy->save_frozen(x3, w.detach(), call);
    record_linear("linear[" + strategy->type() + ", frozen]", y, x, w, b, {w},
                  [state = std::move(state)](std::vector<Tensor>&) { return state; }, strategy, B, L);
    return y;
  }
  // A compressed strategy whose x the tape gives back defers its save to backward (see
  // Strategy::note_deferred_call): it keeps nothing of its own.
  if (strategy->can_defer_save()) {
    autograd::KeptInput kept = autograd::keep_input(x, x);
    if (kept.recompute) {
      strategy->note_deferred_call(x3, w.detach(), call);
      std::vector<Tensor> saved = kept.tensors;
      saved.push_back(w);  // a parameter: not counted as saved
      const size_t n_kept = kept.tensors.size();
      record_linear(name, y, x, w, b, std::move(saved),
                    [strategy, recompute = std::move(kept.recompute), n_kept, sequences = call.sequences,
                     B, L, I](std::vector<Tensor>& s) {
                      const Tensor xr =
                          recompute({s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n_kept)}).view({B, L, I});
                      for (size_t i = 0; i < n_kept; ++i) s[i] = Tensor();  // decoded copies: used
                      // The state from the same x at the same step; the sibling layers' shared
                      // input (CallContext::shared) is not kept for backward, so each computes
                      // its own. x made again is dropped on return unless the state holds it.
                      return strategy->save(xr, s.back(), CallContext{sequences, nullptr}, /*deferred=*/true);
                    },
                    strategy, B, L);
      return y;
    }
  }
  SavedState state = strategy->save(x3, w.detach(), call);
  // Exact lean: an exact state keeping x itself keeps what x's producer keeps instead, where
  // that gives x back (lb/autograd/kept_input.h), and recomputes x in backward, bit for bit.
  autograd::Node::Recompute recompute;
  if (state.exact && state.tensors.size() == 1) {
    autograd::KeptInput kept = autograd::keep_input(x, state.tensors[0]);
    recompute = std::move(kept.recompute);
    state.tensors = std::move(kept.tensors);
  }
  std::vector<Tensor> saved = state.tensors;
  saved.push_back(x.requires_grad() ? w : Tensor());  // w for g_x (a parameter: not counted as saved)
  const size_t n_state = state.tensors.size();
  state.tensors.clear();
  record_linear(name, y, x, w, b, std::move(saved),
                [state = std::move(state), n_state, recompute, B, L](std::vector<Tensor>& s) {
                  SavedState st = state;
                  st.tensors.assign(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n_state));
                  for (size_t i = 0; i < n_state; ++i) s[i] = Tensor();  // st holds them now
                  if (recompute) st.tensors = {recompute(st.tensors).view({B, L, st.geom.I})};  // decoded copies dropped
                  return st;
                },
                strategy, B, L);
  return y;
}

}  // namespace lb::nn::backward
