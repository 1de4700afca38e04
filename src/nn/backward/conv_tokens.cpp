// The token (GEMM) view of a convolution for the backward strategies, and strategy_conv2d.
#include <algorithm>
#include <chrono>

#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/nn/backward/strategy.h"
#include "lb/ops/reduce.h"
#include "src/backend/conv_tokens.h"
#include "src/backend/copy.h"

namespace lb::nn::backward {

Tensor conv_to_tokens(const Tensor& x, const ConvGeometry& cg) {
  return backend::conv_token_kernels(x.device()).to_tokens(x, cg);
}

Tensor conv_from_tokens(const Tensor& tokens, const ConvGeometry& cg) {
  return backend::conv_token_kernels(tokens.device()).from_tokens(tokens, cg);
}

SavedState Strategy::save_conv(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg, const CallContext& call) {
  check_device(x, /*conv=*/true);
  SavedState s;
  if (record_.fell_back) {
    s = save_conv_exact(x, w2d, cg);
  } else if (x.device().is_cpu() && !conv_token_view_on_cpu()) {
    s = save_conv_impl(x, w2d, cg, call);
  } else {
    s = Strategy::save_conv_impl(x, w2d, cg, call);
    s.token_view = true;
  }
  s.step = record_.step();
  return s;
}

Gradients Strategy::backward_conv(const SavedState& s, const Tensor& g_y, const Tensor& w2d, bool want_gx,
                                  bool want_gw, const ConvGeometry& cg) {
  return s.token_view ? Strategy::backward_conv_image_impl(s, g_y, w2d, want_gx, want_gw, cg)
                      : backward_conv_image_impl(s, g_y, w2d, want_gx, want_gw, cg);
}

SavedState Strategy::save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg,
                                    const CallContext& call) {
  return save(conv_to_tokens(x, cg), w2d, call);
}

Gradients Strategy::backward_conv_tokens_impl(const SavedState& s, const Tensor& g_y_tokens, const Tensor& w2d,
                                              bool want_gx, bool want_gw, const ConvGeometry&) {
  return backward(s, g_y_tokens, w2d, want_gx, want_gw);
}

SavedState Strategy::save_conv_exact(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg) {
  record_.measured.last_geom = {cg.x_shape[0], cg.Ho * cg.Wo, w2d.size(1), w2d.size(0)};
  record_.measured.last_geom.exact_saved = cg.x_shape[1] * cg.x_shape[2] * cg.x_shape[3];
  SavedState s;
  s.geom = record_.measured.last_geom;
  s.exact = true;
  s.conv_image = true;
  // bf16 under bf16 products: exact for im2col convolutions, one more rounding of the input
  // for Winograd ones (lb/autograd/saved_operand.h)
  s.tensors = {autograd::keep_product_operand(x)};
  record_.measured.last_saved_bytes = static_cast<int64_t>(s.tensors[0].nbytes());
  return s;
}

Gradients Strategy::backward_conv_image_impl(const SavedState& s, const Tensor& g_y, const Tensor& w2d,
                                             bool want_gx, bool want_gw, const ConvGeometry& cg) {
  if (s.conv_image) {
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor x = autograd::saved_f32(s.tensors.at(0));
    const Tensor w = w2d.view({w2d.size(0), cg.x_shape[1], cg.kH, cg.kW});
    const Conv2dGrads g = conv2d_grads(g_y, x, w, cg.args, want_gx, want_gw, false);
    Gradients r;
    r.grad_input = g.grad_input;  // already the image gradient (N, C, H, W)
    if (want_gw) r.grad_weight = g.grad_weight.view({w2d.size(0), w2d.size(1)});
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    record_.count_backward(ms);
    return r;
  }
  const int64_t N = g_y.size(0), O = g_y.size(1), L = cg.Ho * cg.Wo;
  // g_y (N, O, Ho, Wo) -> tokens (N, L, O)
  const Tensor gt = backend::conv_token_kernels(g_y.device()).transpose_last2(g_y.reshape({N, O, L}));
  return backward_conv_tokens_impl(s, gt, w2d, want_gx, want_gw, cg);
}

Tensor strategy_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args,
                       const std::shared_ptr<Strategy>& strategy, const CallContext& call) {
  LB_CHECK(strategy != nullptr, "strategy_conv2d: no strategy");
  if (args.groups != 1 || !w.requires_grad() || !autograd::should_record({x, w, b}))
    return conv2d(x, w, b, args);  // exact op: grouped convs, frozen weights, no grad
  Tensor y;
  {
    NoGradGuard no_grad;
    y = conv2d(x, w, b, args);  // exact forward (checks shapes)
  }
  ConvGeometry cg;
  cg.x_shape = x.shape();
  cg.kH = w.size(2);
  cg.kW = w.size(3);
  cg.Ho = y.size(2);
  cg.Wo = y.size(3);
  cg.args = args;
  const int64_t O = w.size(0);
  const Tensor w2d = w.detach().reshape({O, -1});
  SavedState state = strategy->save_conv(x.detach(), w2d, cg, call);
  std::vector<Tensor> saved = state.tensors;
  saved.push_back(w);  // a parameter: costs no saved bytes, and the exact conv backward wants
                      // its shape even when only g_w is needed
  const size_t n_state = state.tensors.size();
  state.tensors.clear();
  autograd::record(
      "conv2d[" + strategy->type() + "]", y, {x, w, b}, saved,
      [strategy, state = std::move(state), n_state, cg, w_shape = w.shape(), O](
          const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
        SavedState st = state;
        st.tensors.assign(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n_state));
        const Tensor w2d = s.back().defined() ? s.back().reshape({O, -1}) : Tensor();
        const Tensor gc = backend::contiguous(g);
        Gradients gr = strategy->backward_conv(st, gc, w2d, need[0], need[1], cg);
        if (need[0] && gr.grad_input.dim() != 4) gr.grad_input = conv_from_tokens(gr.grad_input, cg);
        return std::vector<Tensor>{need[0] ? gr.grad_input : Tensor(),
                                   need[1] ? gr.grad_weight.reshape(w_shape) : Tensor(),
                                   need[2] ? (gr.grad_bias.defined() ? gr.grad_bias : sum(g, {0, 2, 3}))
                                           : Tensor()};
      });
  return y;
}

}  // namespace lb::nn::backward
