// ProbedStrategy: a strategy's backward measured against the exact one (see probe.h).
#include "lb/nn/backward/probe.h"

#include "lb/core/error.h"

namespace lb::nn::backward {

void add_closeness(const Tensor& e, const Tensor& a, double& dot, double& ee, double& aa, double& dd) {
  if (!e.defined() || !a.defined()) return;
  LB_CHECK(e.numel() == a.numel(), "gradient probe: exact and strategy gradients differ in size (",
           shape_str(e.shape()), " vs ", shape_str(a.shape()), ")");
  const auto ev = e.to_double_vector(), av = a.to_double_vector();
  for (size_t i = 0; i < ev.size(); ++i) {
    dot += ev[i] * av[i];
    ee += ev[i] * ev[i];
    aa += av[i] * av[i];
    dd += (ev[i] - av[i]) * (ev[i] - av[i]);
  }
}

ProbedStrategy::ProbedStrategy(std::shared_ptr<Strategy> inner) : inner_(std::move(inner)) {
  LB_CHECK(inner_ != nullptr, "gradient probe: no strategy to wrap");
  set_layer(inner_->record().name, inner_->record().id, inner_->record().conv);
  inner_context_ = inner_->record().step_context;
  inner_measured_ = inner_->record().measured;
  StepContext probe = inner_->record().step();
  probe.stream = kProbeStream;
  record_.step_context = std::make_shared<const StepContext>(probe);
  inner_->record().step_context = record_.step_context;
}

void ProbedStrategy::end() {
  if (ended_) return;
  ended_ = true;
  inner_->record().step_context = inner_context_;
  inner_->record().measured = inner_measured_;
}

std::unique_ptr<Strategy> ProbedStrategy::clone() const {
  return std::make_unique<ProbedStrategy>(std::shared_ptr<Strategy>(inner_->clone()));
}

SavedState ProbedStrategy::wrap(SavedState inner, SavedState exact) {
  SavedState s;
  s.geom = inner.geom;
  s.sequences = inner.sequences;
  s.step = inner.step;
  s.tensors = std::move(inner.tensors);
  s.wrapped_tensors = s.tensors.size();
  for (Tensor& t : exact.tensors) s.tensors.push_back(std::move(t));
  inner.tensors.clear();
  s.wrapped = std::make_shared<const SavedState>(std::move(inner));
  return s;
}

SavedState ProbedStrategy::inner_state(const SavedState& s) {
  LB_CHECK(s.wrapped != nullptr, "gradient probe: a state saved without the probe reached its backward");
  SavedState in = *s.wrapped;
  in.tensors.assign(s.tensors.begin(), s.tensors.begin() + static_cast<std::ptrdiff_t>(s.wrapped_tensors));
  return in;
}

void ProbedStrategy::record(const Gradients& exact, const Gradients& approx) {
  ++stats_.calls;
  add_closeness(exact.grad_weight, approx.grad_weight, stats_.gw_dot, stats_.gw_ee, stats_.gw_aa, stats_.gw_dd);
  add_closeness(exact.grad_input, approx.grad_input, stats_.gx_dot, stats_.gx_ee, stats_.gx_aa, stats_.gx_dd);
}

void ProbedStrategy::end_to_end(const Tensor& g_x) {
  if (comparing_) {
    exact_gx_.push_back(g_x);  // held, not copied: backward never changes a gradient in place
    return;
  }
  if (call_ < exact_gx_.size())
    add_closeness(exact_gx_[call_], g_x, stats_.e2e_gx_dot, stats_.e2e_gx_ee, stats_.e2e_gx_aa, stats_.e2e_gx_dd);
  ++call_;
}

SavedState ProbedStrategy::save_impl(const Tensor& x, const Tensor& w, const CallContext& call) {
  const bool compare = compares();
  SavedState exact;
  if (compare) {  // x itself, as the probe's reference
    exact.exact = true;
    exact.tensors = {x};
  }
  return wrap(inner_->save(x, w, call), std::move(exact));
}

Gradients ProbedStrategy::backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                                        bool want_gw) {
  Gradients approx = inner_->backward(inner_state(s), g_y, w, want_gx, want_gw);
  if (s.tensors.size() == s.wrapped_tensors || !(want_gx || want_gw)) {
    end_to_end(approx.grad_input);  // the second pass, or the strategy ran exact
    return approx;
  }
  SavedState ex;
  ex.geom = s.geom;
  ex.exact = true;
  ex.tensors = {s.tensors.at(s.wrapped_tensors)};
  Gradients exact = backward_exact(ex, g_y, w, want_gx, want_gw);
  record(exact, approx);
  exact.grad_bias = approx.grad_bias;  // Σ g_y is exact either way
  end_to_end(exact.grad_input);
  return exact;
}

SavedState ProbedStrategy::save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg,
                                          const CallContext& call) {
  const bool compare = compares();
  SavedState inner = inner_->save_conv(x, w2d, cg, call);
  SavedState exact;
  if (compare) exact = save_conv_exact(x, w2d, cg);  // the image itself
  return wrap(std::move(inner), std::move(exact));
}

Gradients ProbedStrategy::backward_conv_image_impl(const SavedState& s, const Tensor& g_y, const Tensor& w2d,
                                                   bool want_gx, bool want_gw, const ConvGeometry& cg) {
  Gradients approx = inner_->backward_conv(inner_state(s), g_y, w2d, want_gx, want_gw, cg);
  if (want_gx && approx.grad_input.dim() != 4) approx.grad_input = conv_from_tokens(approx.grad_input, cg);
  if (s.tensors.size() == s.wrapped_tensors || !(want_gx || want_gw)) {
    end_to_end(approx.grad_input);
    return approx;
  }
  SavedState ex;
  ex.geom = s.geom;
  ex.exact = true;
  ex.conv_image = true;
  ex.tensors = {s.tensors.at(s.wrapped_tensors)};
  Gradients exact = Strategy::backward_conv_image_impl(ex, g_y, w2d, want_gx, want_gw, cg);
  record(exact, approx);
  exact.grad_bias = approx.grad_bias;
  end_to_end(exact.grad_input);
  return exact;
}

}  // namespace lb::nn::backward
