// CPU kernels of a convolution's token view (src/backend/conv_tokens.h): im2col per image
// then a tiled transpose, and the adjoint.
#include <algorithm>

#include "lb/core/checks.h"
#include "lb/core/conv_geometry.h"
#include "lb/core/dispatch.h"
#include "lb/core/views.h"
#include "src/backend/conv_tokens.h"
#include "src/backend/copy.h"
#include "src/cpu/im2col.h"

namespace lb::backend {

namespace {
// (B, R, C) contiguous -> (B, C, R) contiguous, in 32x32 tiles (the generic strided copy is
// several times slower, and these layouts are moved on every strategy-driven conv call).
Tensor transpose_last2(const Tensor& t_in) {
  const Tensor t = backend::contiguous(t_in);
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

Tensor to_tokens(const Tensor& x, const ConvGeometry& cg) {
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  const int64_t L = cg.Ho * cg.Wo, I = C * cg.kH * cg.kW;
  if (is_pointwise(cg)) return transpose_last2(backend::reshape(x, {N, C, H * W}));
  const Tensor xc = backend::contiguous(x);
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

Tensor from_tokens(const Tensor& tokens, const ConvGeometry& cg) {
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  const int64_t L = cg.Ho * cg.Wo, I = C * cg.kH * cg.kW;
  if (is_pointwise(cg))
    return views::view(transpose_last2(tokens), {N, C, H, W});
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

}  // namespace

const ConvTokenKernels kCpuConvTokens{to_tokens, from_tokens, transpose_last2};

}  // namespace lb::backend
