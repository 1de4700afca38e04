// INSTANT on Conv2d in the image layout (instant.h): forward never builds the (N, L, C·kH·kW)
// token view (9× x for 3×3) and backward never transposes g_y.
//   save, x on the channel axis: X̂_n (R_x, L) = (im2col(x_n) Pᵀ)ᵀ = conv2d(x, P viewed as
//             (R_x, C, kH, kW)), kept as the conv output (N, R_x, L);
//   save, x on the token axis:   x̂[:, n, :] = P im2col(x_n)ᵀ (R_x, I) into (R_x, N, I) (the
//             Linear layout), image by image from a per-thread column buffer.
//   backward: straight from g_y (N, O, L), image by image, in parallel over images:
//             g_w = (Σ_n g_n X̂_nᵀ) P (channel) or Σ_n (g_n Pᵀ) x̂[:, n, :] (token, one GEMM over
//             all images at the end); g_x,n = col2im(columns) with columns = W2ᵀ (Q g_n),
//             W2 = Q w (g_y on the channel axis) or (Q g_nᵀ w)ᵀ Q (token axis), in a
//             per-thread (I, L) buffer; g_b = Σ_n g_n 1.
// Calibration passes keep the image and accumulate the Gram statistics from the im2col
// columns and the g_y image (accumulate_columns).
#include <omp.h>

#include <chrono>

#include "lb/autograd/grad_mode.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/nn/backward/instant.h"
#include "lb/ops/conv.h"
#include "lb/ops/linalg.h"
#include "src/backend/copy.h"
#include "src/backend/lowrank.h"

namespace lb::nn::backward {

namespace {
constexpr double kImageLayout = 1.0;  // SavedState::scalars[1]: X̂ is (N, R_x, L)

Tensor in_dtype(const Tensor& t, DType dt) {
  if (t.dtype() == dt) return backend::contiguous(t);
  NoGradGuard no_grad;
  return backend::contiguous(t.to(dt));
}
}  // namespace

SavedState Instant::save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg, const CallContext&) {
  const int64_t N = x.size(0), L = cg.Ho * cg.Wo, I = w2d.size(1), O = w2d.size(0);
  LayerGeometry g{N, L, I, O};
  g.exact_saved = x.size(1) * x.size(2) * x.size(3);  // the exact state is the image
  if (record_.calibrating) {
    // The Gram statistics straight from each image's im2col columns (C·kH·kW, L), then the
    // exact image state (no (N, L, I) token view, no token-path backward).
    const int64_t C = x.size(1), H = x.size(2), W = x.size(3);
    const Tensor xc = in_dtype(x, settings_.gram_dtype);
    Tensor cols = Tensor::empty({I, L}, settings_.gram_dtype, Device::cpu(), MemTag::Workspace);
    accumulate_columns(x_acc_, N, L, I, [&](int64_t b) {
      detail::dispatch_float(settings_.gram_dtype, "instant calibration", [&](auto tag) {
        using T = decltype(tag);
        im2col(xc.data<T>() + b * C * H * W, C, H, W, cg.kH, cg.kW, cg.args, cols.data<T>());
      });
      return cols;
    }, "input");
    return save_conv_exact(x, w2d, cg);
  }
  if (!compresses(g)) {  // exact: keep the image itself, not its kH·kW times larger tokens
    if (calibrations_ > 0) ++fallback_calls_;
    return save_conv_exact(x, w2d, cg);
  }
  record_.measured.last_geom = g;
  if (x_basis_.token_axis) {
    // x̂ (R_x, N, I) with x̂[:, n, :] = P x_n = P im2col(x_n)ᵀ, the Linear layout, image by
    // image from a per-thread (I, L) column buffer: no (N, L, I) token view, no transpose.
    const Tensor P = in_dtype(x_basis_.proj, x.dtype());
    const Tensor xc = backend::contiguous(x);
    const int64_t Rx = P.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor xh = Tensor::empty({Rx, N, I}, x.dtype());
    detail::dispatch_float(x.dtype(), "instant conv save", [&](auto tag) {
      using T = decltype(tag);
      const auto& host = backend::lowrank_host_kernels<T>();
#pragma omp parallel if (N > 1)
      {
        Tensor cols = Tensor::empty({I, L}, x.dtype(), Device::cpu(), MemTag::Workspace);
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < N; ++n) {
          im2col(xc.data<T>() + n * C * H * W, C, H, W, cg.kH, cg.kW, cg.args, cols.data<T>());
          host.gemm_serial(false, true, Rx, I, L, T(1), P.data<T>(), L, cols.data<T>(), L, T(0),
                           xh.data<T>() + n * I, N * I);
        }
      }
    });
    SavedState s;
    s.geom = g;
    s.scalars = {static_cast<double>(generation_)};
    s.tensors = {xh};
    record_.measured.last_saved_bytes = static_cast<int64_t>(xh.nbytes());
    return s;
  }
  const Tensor P = in_dtype(x_basis_.proj, x.dtype());
  const int64_t Rx = P.size(0), C = x.size(1);
  NoGradGuard no_grad;
  const Tensor y = conv2d(x, P.view({Rx, C, cg.kH, cg.kW}), Tensor(), cg.args);  // (N, R_x, Ho, Wo)
  SavedState s;
  s.geom = g;
  s.scalars = {static_cast<double>(generation_), kImageLayout};
  s.tensors = {y.reshape({N, Rx, L})};
  record_.measured.last_saved_bytes = static_cast<int64_t>(s.tensors[0].nbytes());
  return s;
}

Gradients Instant::backward_conv_image_impl(const SavedState& s, const Tensor& g_y, const Tensor& w2d,
                                            bool want_gx, bool want_gw, const ConvGeometry& cg) {
  if (record_.calibrating && s.conv_image) {  // output-gradient Gram from the image (N, O, L) as is
    const int64_t N = g_y.size(0), O = g_y.size(1), L = g_y.size(2) * g_y.size(3);
    const Tensor gc = in_dtype(g_y, settings_.gram_dtype);
    accumulate_columns(g_acc_, N, L, O, [&](int64_t b) { return gc.select(0, b).reshape({O, L}); },
                       "output-gradient");
    return Strategy::backward_conv_image_impl(s, g_y, w2d, want_gx, want_gw, cg);
  }
  if (s.exact || record_.calibrating) return Strategy::backward_conv_image_impl(s, g_y, w2d, want_gx, want_gw, cg);
  // Saved x̂: (N, R_x, L) on the channel axis (image layout), (R_x, N, I) on the token axis.
  const bool image_x = s.scalars.size() == 2 && s.scalars[1] == kImageLayout;
  LB_CHECK(image_x == !x_basis_.token_axis, "instant (", record_.name, "): saved state layout ",
           "does not match the input basis axis");
  LB_CHECK(static_cast<int64_t>(s.scalars[0]) == generation_, "instant (", record_.name,
           "): the bases changed between this forward and its backward. HINT: run calibration "
           "only between optimizer steps, after every pending backward");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  // (w2d is undefined when no g_x is wanted.)
  const int64_t L = cg.Ho * cg.Wo, I = s.geom.I, O = g_y.size(1);
  const DType dt = g_y.dtype();
  const bool x_token = !image_x, g_token = g_basis_.token_axis;
  const Tensor P = want_gw ? in_dtype(x_basis_.proj, dt) : Tensor();  // (R_x, I) or (R_x, L)
  const Tensor Q = want_gx ? in_dtype(g_basis_.proj, dt) : Tensor();  // (R_y, O) or (R_y, L)
  const int64_t Rx = want_gw ? P.size(0) : 0, Ry = want_gx ? Q.size(0) : 0;
  // Channel-axis g: W2 = Q w (R_y, I) is shared by every image.
  const Tensor W2 = want_gx && !g_token ? backend::contiguous(matmul(Q, w2d)) : Tensor();
  const Tensor wc = want_gx && g_token ? backend::contiguous(w2d) : Tensor();
  Tensor dx = want_gx ? Tensor::zeros(cg.x_shape, dt) : Tensor();
  Tensor gb = Tensor::zeros({O}, dt);
  // g_w's core: channel x, Σ_n g_n X̂_nᵀ (O, R_x), then · P; token x, A (O, R_x·N) with
  // A[:, r·N + n] = (g_n Pᵀ)[:, r], then · x̂ viewed (R_x·N, I).
  Tensor gwr = want_gw && !x_token ? Tensor::zeros({O, Rx}, dt) : Tensor();
  Tensor A = want_gw && x_token ? Tensor::empty({O, Rx * N}, dt) : Tensor();
  const int64_t nt = N > 1 ? omp_get_max_threads() : 1;
  detail::dispatch_float(dt, "instant conv backward", [&](auto tag) {
    using T = decltype(tag);
    const auto& host = backend::lowrank_host_kernels<T>();
    const T* pg = g_y.data<T>();
    const T* pxh = want_gw ? s.tensors.at(0).data<T>() : nullptr;
    // Per-thread partial sums of the channel-axis g_w core and of g_b.
    std::vector<T> part_w(static_cast<size_t>(nt * O * Rx), T(0)), part_b(static_cast<size_t>(nt * O), T(0));
    const Tensor tq = want_gx && g_token ? Tensor::empty({N * Ry, O}, dt) : Tensor();
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      const int64_t tid = omp_get_thread_num();
      std::vector<T> tt(static_cast<size_t>(Ry * L)), cols(static_cast<size_t>(want_gx && !g_token ? I * L : 0));
      std::vector<T> u(static_cast<size_t>(want_gw && x_token ? O * Rx : 0));
      std::vector<T*> trows(static_cast<size_t>(Ry));
      for (int64_t r = 0; r < Ry; ++r) trows[r] = tt.data() + r * L;
#pragma omp for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const T* gn = pg + n * O * L;  // (O, L)
        host.row_sums_acc(gn, O, L, part_b.data() + tid * O);
        if (want_gw && !x_token) host.rows_dot_acc(gn, O, pxh + n * Rx * L, Rx, L, part_w.data() + tid * O * Rx);
        if (want_gw && x_token) {  // u = g_n Pᵀ (O, R_x) into A's columns r·N + n
          host.gemm_serial(false, true, O, Rx, L, T(1), gn, L, P.data<T>(), L, T(0), u.data(), Rx);
          T* pa = A.data<T>();
          for (int64_t o = 0; o < O; ++o)
            for (int64_t r = 0; r < Rx; ++r) pa[o * Rx * N + r * N + n] = u[o * Rx + r];
        }
        if (want_gx && g_token) {  // Q g_nᵀ (R_y, O) into rows n·R_y.. of tq (below)
          host.gemm_serial(false, true, Ry, O, L, T(1), Q.data<T>(), L, gn, L, T(0), tq.data<T>() + n * Ry * O, O);
        } else if (want_gx) {  // columns = W2ᵀ (Q g_n)
          host.project_tokens(Q.data<T>(), Ry, O, gn, 1, L, trows.data(), 0, nullptr);  // (R_y, L)
          // (I, R_y)(R_y, L) through the GEMM kernel: R_y here is often 30-60 (ResNet's first
          // stages), where the blocked kernel beats expand_tokens' small-rank tiles.
          host.gemm_serial(true, false, I, L, Ry, T(1), W2.data<T>(), I, tt.data(), L, T(0), cols.data(), L);
          col2im(cols.data(), C, H, W, cg.kH, cg.kW, cg.args, dx.data<T>() + n * C * H * W);
        }
      }
    }
    if (want_gx && g_token) {
      // Token-axis g: columns_n (I, L) = (Q g_nᵀ w)ᵀ Q. The middle product runs as one GEMM
      // over all images, (N·R_y, O)(O, I): per image it would be an (R_y, O)(O, I) product
      // with R_y as small as 1, reading all of w for each image (memory-bound: on ResNet-18's
      // last stage that made INSTANT's backward slower than the exact one).
      const Tensor z = backend::contiguous(matmul(tq, wc));  // (N·R_y, I)
      const T* pz = z.data<T>();
#pragma omp parallel num_threads(nt) if (nt > 1)
      {
        std::vector<T> cols(static_cast<size_t>(I * L));
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n) {
          host.gemm_serial(true, false, I, L, Ry, T(1), pz + n * Ry * I, I, Q.data<T>(), L, T(0), cols.data(), L);
          col2im(cols.data(), C, H, W, cg.kH, cg.kW, cg.args, dx.data<T>() + n * C * H * W);
        }
      }
    }
    for (int64_t t = 0; t < nt; ++t) {
      if (want_gw && !x_token)
        for (int64_t i = 0; i < O * Rx; ++i) gwr.data<T>()[i] += part_w[t * O * Rx + i];
      for (int64_t o = 0; o < O; ++o) gb.data<T>()[o] += part_b[t * O + o];
    }
  });
  Gradients out;
  if (want_gw)
    out.grad_weight = x_token ? matmul(A, s.tensors.at(0).view({Rx * N, I}))  // (O, R_x·N)(R_x·N, I)
                              : matmul(gwr, P);                               // (O, R_x)(R_x, I)
  if (want_gx) out.grad_input = dx;
  out.grad_bias = gb;
  record_.count_backward(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return out;
}

}  // namespace lb::nn::backward
