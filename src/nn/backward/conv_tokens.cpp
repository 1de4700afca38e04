// The token (GEMM) view of a convolution for the backward strategies, and strategy_conv2d.
#include <algorithm>
#include <chrono>

#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/nn/backward/strategy.h"
#include "lb/ops/reduce.h"

namespace lb::nn::backward {

namespace {
// (B, R, C) contiguous -> (B, C, R) contiguous, in 32x32 tiles (the generic strided copy is
// several times slower, and these layouts are moved on every strategy-driven conv call).
Tensor transpose_last2(const Tensor& t_in) {
  const Tensor t = detail::contiguous_nograd(t_in);
  const int64_t B = t.size(0), R = t.size(1), C = t.size(2);
  Tensor out = Tensor::empty({B, C, R}, t.dtype());
  detail::dispatch_float(t.dtype(), "transpose_last2", [&](auto tag) {
    using T = decltype(tag);
    const T* src = t.data<T>();
    T* dst = out.data<T>();
    constexpr int64_t kTile = 32;
    const int64_t rt = (R + kTile - 1) / kTile, ct = (C + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) if (B * R * C > (1 << 16)) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t tile = 0; tile < rt * ct; ++tile) {
        const int64_t r0 = tile / ct * kTile, c0 = tile % ct * kTile;
        const int64_t r1 = std::min(R, r0 + kTile), c1 = std::min(C, c0 + kTile);
        const T* s = src + b * R * C;
        T* d = dst + b * R * C;
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) d[c * R + r] = s[r * C + c];
      }
  });
  return out;
}

bool is_pointwise(const ConvGeometry& cg) {
  const auto& a = cg.args;
  return cg.kH == 1 && cg.kW == 1 && a.stride[0] == 1 && a.stride[1] == 1 && a.padding[0] == 0 &&
         a.padding[1] == 0;
}
}  // namespace

Tensor conv_to_tokens(const Tensor& x, const ConvGeometry& cg) {
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  const int64_t L = cg.Ho * cg.Wo, I = C * cg.kH * cg.kW;
  if (is_pointwise(cg)) return transpose_last2(x.reshape({N, C, H * W}));
  const Tensor xc = detail::contiguous_nograd(x);
  Tensor cols = Tensor::empty({N, I, L}, x.dtype());
  detail::dispatch_float(x.dtype(), "conv_to_tokens", [&](auto tag) {
    using T = decltype(tag);
    const T* px = xc.data<T>();
    T* pc = cols.data<T>();
#pragma omp parallel for if (N > 1) schedule(static)
    for (int64_t n = 0; n < N; ++n)
      im2col(px + n * C * H * W, C, H, W, cg.kH, cg.kW, cg.args, pc + n * I * L);
  });
  return transpose_last2(cols);  // (N, L, I)
}

Tensor conv_from_tokens(const Tensor& tokens, const ConvGeometry& cg) {
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  const int64_t L = cg.Ho * cg.Wo, I = C * cg.kH * cg.kW;
  if (is_pointwise(cg))
    return transpose_last2(tokens).reshape({N, C, H, W});
  const Tensor cols = transpose_last2(tokens);  // (N, I, L)
  Tensor dx = Tensor::zeros(cg.x_shape, tokens.dtype());
  detail::dispatch_float(tokens.dtype(), "conv_from_tokens", [&](auto tag) {
    using T = decltype(tag);
    const T* pc = cols.data<T>();
    T* pd = dx.data<T>();
#pragma omp parallel for if (N > 1) schedule(static)
    for (int64_t n = 0; n < N; ++n)
      col2im(pc + n * I * L, C, H, W, cg.kH, cg.kW, cg.args, pd + n * C * H * W);
  });
  return dx;
}

SavedState Strategy::save_conv(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg) {
  return save(conv_to_tokens(x, cg), w2d);
}

Gradients Strategy::backward_conv(const SavedState& s, const Tensor& g_y_tokens, const Tensor& w2d,
                                  bool want_gx, bool want_gw, const ConvGeometry&) {
  return backward(s, g_y_tokens, w2d, want_gx, want_gw);
}

SavedState Strategy::save_conv_exact(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg) {
  last_geom_ = {cg.x_shape[0], cg.Ho * cg.Wo, w2d.size(1), w2d.size(0)};
  last_geom_.exact_saved = cg.x_shape[1] * cg.x_shape[2] * cg.x_shape[3];
  SavedState s;
  s.geom = last_geom_;
  s.exact = true;
  s.conv_image = true;
  // bf16 under bf16 products: exact for im2col convolutions, one more rounding of the input
  // for Winograd ones (lb/autograd/saved_operand.h)
  s.tensors = {autograd::keep_product_operand(x)};
  last_saved_bytes_ = static_cast<int64_t>(s.tensors[0].nbytes());
  return s;
}

Gradients Strategy::backward_conv_image(const SavedState& s, const Tensor& g_y, const Tensor& w2d,
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
    if (calibrating_) {
      ++calib_calls_;
      calib_backward_ms_ += ms;
    } else {
      count_backward(ms);
    }
    return r;
  }
  const int64_t N = g_y.size(0), O = g_y.size(1), L = cg.Ho * cg.Wo;
  // g_y (N, O, Ho, Wo) -> tokens (N, L, O)
  const Tensor gt = transpose_last2(g_y.reshape({N, O, L}));
  return backward_conv(s, gt, w2d, want_gx, want_gw, cg);
}

Tensor strategy_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args,
                       const std::shared_ptr<Strategy>& strategy) {
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
  SavedState state = strategy->save_conv_checked(x.detach(), w2d, cg);
  const bool probe = strategy->probing();  // keep the image too: the exact backward runs beside
  SavedState exact_state;
  if (probe) exact_state = strategy->save_conv_exact(x.detach(), w2d, cg);
  std::vector<Tensor> saved = state.tensors;
  const size_t n_exact = exact_state.tensors.size();
  for (const Tensor& t : exact_state.tensors) saved.push_back(t);
  exact_state.tensors.clear();
  saved.push_back(w);  // a parameter: costs no saved bytes, and the exact conv backward wants
                      // its shape even when only g_w is needed
  const size_t n_state = state.tensors.size();
  state.tensors.clear();
  autograd::record(
      "conv2d[" + strategy->type() + "]", y, {x, w, b}, saved,
      [strategy, state = std::move(state), exact_state = std::move(exact_state), n_state, n_exact, probe, cg,
       w_shape = w.shape(), O](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
        SavedState st = state;
        st.tensors.assign(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n_state));
        const Tensor w2d = s.back().defined() ? s.back().reshape({O, -1}) : Tensor();
        const Tensor gc = detail::contiguous_nograd(g);
        Gradients gr = strategy->backward_conv_image(st, gc, w2d, need[0], need[1], cg);
        if (need[0] && gr.grad_input.dim() != 4) gr.grad_input = conv_from_tokens(gr.grad_input, cg);
        if (probe && (need[0] || need[1])) {
          SavedState ex = exact_state;
          ex.tensors.assign(s.begin() + static_cast<std::ptrdiff_t>(n_state),
                            s.begin() + static_cast<std::ptrdiff_t>(n_state + n_exact));
          Gradients exact = strategy->backward_conv_image(ex, gc, w2d, need[0], need[1], cg);
          if (need[0] && exact.grad_input.dim() != 4) exact.grad_input = conv_from_tokens(exact.grad_input, cg);
          strategy->record_probe(exact, gr);
          gr.grad_input = exact.grad_input;
          gr.grad_weight = exact.grad_weight;
        }
        return std::vector<Tensor>{need[0] ? gr.grad_input : Tensor(),
                                   need[1] ? gr.grad_weight.reshape(w_shape) : Tensor(),
                                   need[2] ? (gr.grad_bias.defined() ? gr.grad_bias : sum(g, {0, 2, 3}))
                                           : Tensor()};
      });
  return y;
}

}  // namespace lb::nn::backward
