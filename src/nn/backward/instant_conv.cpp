// INSTANT on Conv2d without the im2col buffer where the channel axis allows it (instant.h).
//   save:     X̂ (N·L, R_x) = im2col(x) Pᵀ = conv2d(x, P viewed as (R_x, C, kH, kW)), transposed
//             to tokens; forward never builds the (N, L, C·kH·kW) view (9× x for 3×3).
//   backward: g_x,n = col2im(W2ᵀ T_nᵀ) with T = G Qᵀ (N·L, R_y) and W2 = Q w (R_y, I), one
//             image at a time in a per-thread (I, L) buffer; g_w as for Linear.
#include <chrono>

#include "lb/autograd/grad_mode.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/nn/backward/instant.h"
#include "lb/ops/conv.h"
#include "lb/ops/linalg.h"
#include "src/cpu/lowrank.h"

namespace lb::nn::backward {

SavedState Instant::save_conv(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg) {
  const int64_t N = x.size(0), L = cg.Ho * cg.Wo, I = w2d.size(1), O = w2d.size(0);
  const LayerGeometry g{N, L, I, O};
  if (calibrating_ || !compresses(g) || x_basis_.token_axis) return Strategy::save_conv(x, w2d, cg);
  last_geom_ = g;
  const Tensor P = detail::contiguous_nograd(
      x_basis_.proj.dtype() == x.dtype() ? x_basis_.proj : x_basis_.proj.to(x.dtype()));
  const int64_t Rx = P.size(0), C = x.size(1);
  NoGradGuard no_grad;
  const Tensor y = conv2d(x, P.view({Rx, C, cg.kH, cg.kW}), Tensor(), cg.args);  // (N, R_x, Ho, Wo)
  SavedState s;
  s.geom = g;
  s.scalars = {static_cast<double>(generation_)};
  s.tensors = {detail::contiguous_nograd(y.reshape({N, Rx, L}).transpose(1, 2)).view({N * L, Rx})};
  last_saved_bytes_ = static_cast<int64_t>(s.tensors[0].nbytes());
  return s;
}

Gradients Instant::backward_conv(const SavedState& s, const Tensor& gt, const Tensor& w2d,
                                 bool want_gx, bool want_gw, const ConvGeometry& cg) {
  if (s.exact || calibrating_ || !want_gx || g_basis_.token_axis)
    return Strategy::backward_conv(s, gt, w2d, want_gx, want_gw, cg);
  // g_w through the regular path (timed there), g_x image by image here.
  Gradients out = Strategy::backward(s, gt, w2d, false, want_gw);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  const int64_t L = cg.Ho * cg.Wo, I = w2d.size(1), O = w2d.size(0);
  const DType dt = gt.dtype();
  const Tensor Q = detail::contiguous_nograd(g_basis_.proj.dtype() == dt ? g_basis_.proj : g_basis_.proj.to(dt));
  const int64_t Ry = Q.size(0);
  const Tensor T = matmul(gt.view({N * L, O}), Q, false, true);  // (N·L, R_y)
  const Tensor W2 = detail::contiguous_nograd(matmul(Q, w2d));   // (R_y, I)
  Tensor dx = Tensor::zeros(cg.x_shape, dt);
  detail::dispatch_float(dt, "instant conv backward", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* pt = T.data<T_>();
    const T_* pw = W2.data<T_>();
    T_* pd = dx.data<T_>();
#pragma omp parallel if (N > 1)
    {
      std::vector<T_> tt(static_cast<size_t>(Ry * L)), cols(static_cast<size_t>(I * L));
      std::vector<const T_*> rows(static_cast<size_t>(Ry));
#pragma omp for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const T_* tn = pt + n * L * Ry;  // (L, R_y) -> rows (R_y, L)
        for (int64_t l = 0; l < L; ++l)
          for (int64_t r = 0; r < Ry; ++r) tt[r * L + l] = tn[l * Ry + r];
        for (int64_t r = 0; r < Ry; ++r) rows[r] = tt.data() + r * L;
        // cols (I, L): cols[i, l] = Σ_r W2[r, i] · T_n[l, r]
        cpu::expand_tokens(pw, Ry, I, rows.data(), 0, 1, L, cols.data());
        col2im(cols.data(), C, H, W, cg.kH, cg.kW, cg.args, pd + n * C * H * W);
      }
    }
  });
  out.grad_input = dx;
  backward_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace lb::nn::backward
