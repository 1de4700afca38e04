// A convolution's token view with the gather tables (src/backend/conv_tokens.h): tokens = the
// image, flattened and extended by one zero, gathered by an index map (each (l, i) token
// element's source position, the zero where the tap reads padding) — index_select's kernel —
// and the adjoint by index_select's backward kernel (a scatter-add). The CUDA table uses these; the
// CPU tests check them against the CPU loops.
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "lb/core/views.h"
#include "src/backend/conv_tokens.h"
#include "src/backend/copy.h"
#include "src/backend/shape_ops.h"

namespace lb::backend {

namespace {

bool is_pointwise(const ConvGeometry& cg) {
  const auto& a = cg.args;
  return cg.kH == 1 && cg.kW == 1 && a.stride[0] == 1 && a.stride[1] == 1 && a.padding[0] == 0 &&
         a.padding[1] == 0;
}

// The (L·I) source positions in a flattened (C·H·W + 1) image, cached per geometry and device.
Tensor token_index(const ConvGeometry& cg, Device device) {
  const int64_t C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  const auto& a = cg.args;
  using Key = std::array<int64_t, 14>;
  const Key key{C, H, W, cg.kH, cg.kW, a.stride[0], a.stride[1], a.padding[0], a.padding[1], a.dilation[0],
                a.dilation[1], cg.Ho, cg.Wo, static_cast<int64_t>(device.type) * 1024 + device.index};
  static std::mutex m;
  static auto* cache = new std::map<Key, Tensor>;  // never destroyed (device memory outlives statics)
  std::lock_guard<std::mutex> lock(m);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  const int64_t L = cg.Ho * cg.Wo, I = C * cg.kH * cg.kW, zero = C * H * W;
  std::vector<int64_t> idx(static_cast<size_t>(L * I));
  for (int64_t oh = 0; oh < cg.Ho; ++oh)
    for (int64_t ow = 0; ow < cg.Wo; ++ow)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t ki = 0; ki < cg.kH; ++ki)
          for (int64_t kj = 0; kj < cg.kW; ++kj) {
            const int64_t ih = oh * a.stride[0] - a.padding[0] + ki * a.dilation[0];
            const int64_t iw = ow * a.stride[1] - a.padding[1] + kj * a.dilation[1];
            const int64_t l = oh * cg.Wo + ow, i = (c * cg.kH + ki) * cg.kW + kj;
            idx[static_cast<size_t>(l * I + i)] = ih >= 0 && ih < H && iw >= 0 && iw < W ? (c * H + ih) * W + iw : zero;
          }
  Tensor t = Tensor::from_vector(idx, {L * I}).to(device);
  cache->emplace(key, t);
  return t;
}

}  // namespace

namespace generic_conv_tokens {

Tensor transpose_last2(const Tensor& t) { return contiguous(views::transpose(t, 1, 2)); }

Tensor to_tokens(const Tensor& x, const ConvGeometry& cg) {
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  if (is_pointwise(cg)) return transpose_last2(reshape(x, {N, C, H * W}));
  const int64_t size = C * H * W + 1, n = cg.Ho * cg.Wo * C * cg.kH * cg.kW;
  Tensor extended = Tensor::zeros({N, size}, x.dtype(), x.device());
  views::slice(extended, 1, 0, size - 1).copy_(reshape(x, {N, size - 1}));
  Tensor tokens = Tensor::empty({N, n}, x.dtype(), x.device());
  shape_kernels(x.device()).gather_rows(extended, token_index(cg, x.device()), tokens, N, size,
                                        static_cast<int64_t>(dtype_size(x.dtype())));
  return views::view(tokens, {N, cg.Ho * cg.Wo, C * cg.kH * cg.kW});
}

Tensor from_tokens(const Tensor& tokens, const ConvGeometry& cg) {
  const int64_t N = cg.x_shape[0], C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3];
  if (is_pointwise(cg)) return views::view(transpose_last2(tokens), {N, C, H, W});
  const int64_t n = cg.Ho * cg.Wo * C * cg.kH * cg.kW, size = C * H * W + 1;
  const Tensor t = contiguous(tokens);
  Tensor extended = Tensor::zeros({N, size}, tokens.dtype(), tokens.device());
  shape_kernels(tokens.device()).index_add_rows(views::view(t, {N, n}), token_index(cg, tokens.device()), extended, N,
                                                size, 1);
  return views::view(contiguous(views::slice(extended, 1, 0, size - 1)), {N, C, H, W});
}

}  // namespace generic_conv_tokens

namespace {
std::atomic<bool> g_generic_on_cpu{false};
}  // namespace

void set_generic_conv_tokens_on_cpu(bool on) { g_generic_on_cpu = on; }
bool generic_conv_tokens_on_cpu() { return g_generic_on_cpu; }

const ConvTokenKernels kGenericConvTokens{generic_conv_tokens::to_tokens, generic_conv_tokens::from_tokens,
                                          generic_conv_tokens::transpose_last2};

}  // namespace lb::backend
