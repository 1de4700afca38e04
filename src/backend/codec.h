// Internal: the kept-tensor codecs' storage layout, formulas and kernels (lb/autograd/
// saved_codec.h is the user-facing side). A packed tensor is one byte buffer:
//   [scale f32 × groups][zero f32 × groups, affine codecs only][payload]
// over the source's n elements in row-major order, cut into groups of `group` consecutive
// elements (the last one may be shorter).
//   bf16: payload n × u16, round to nearest even; no groups.
//   int8: symmetric, q = clamp(rnd(x / s), -127, 127), s = absmax / 127; x̂ = q s.
//   int4, int2: affine over [min, max] of the group, L = 15 or 3 levels above the zero:
//         q = clamp(rnd((x - min) / s), 0, L), s = (max - min) / L; x̂ = min + q s;
//         two (int4) or four (int2) codes per byte, element i in bits (i mod k) · b up.
// rnd is round-half-up (floor(v + 1/2)) or stochastic rounding floor(v + u): u is 16 bits of
// the Philox stream (seed, subsequence), half i % 2 of draw number offset + i / 2
// (codec_uniform), so E[x̂] = x up to 2⁻¹⁶ of a step; an encoding of n elements uses
// ceil(n / 2) draws. The CPU (src/cpu/codec.cpp) and CUDA (cuda/codec.cu) kernels follow
// these formulas and give the same bytes.
#pragma once
#include <cmath>
#include <cstdint>

#include "lb/core/host_device.h"
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

enum class CodecKind : uint8_t { BF16, Int8, Int4, Int2 };

LB_HD inline int codec_bits(CodecKind k) {
  return k == CodecKind::BF16 ? 16 : k == CodecKind::Int8 ? 8 : k == CodecKind::Int4 ? 4 : 2;
}
LB_HD inline bool codec_affine(CodecKind k) { return k == CodecKind::Int4 || k == CodecKind::Int2; }
// The largest code: 127 (int8, symmetric), 15, 3 (affine).
LB_HD inline int codec_levels(CodecKind k) {
  return k == CodecKind::Int8 ? 127 : k == CodecKind::Int4 ? 15 : 3;
}

struct CodecLayout {
  CodecKind kind = CodecKind::Int8;
  int64_t n = 0;       // elements
  int64_t group = 1;   // elements per group (integer codecs)
  int64_t groups = 0;  // 0 for bf16
  int64_t floats = 0;  // scale (and zero) floats before the payload
  int64_t payload = 0; // bytes
  int64_t bytes() const { return 4 * floats + payload; }
};

inline CodecLayout codec_layout(CodecKind kind, int64_t n, int64_t group) {
  CodecLayout l;
  l.kind = kind;
  l.n = n;
  if (kind == CodecKind::BF16) {
    l.payload = 2 * n;
    return l;
  }
  l.group = group < 1 ? 1 : group;
  l.groups = (n + l.group - 1) / l.group;
  l.floats = (codec_affine(kind) ? 2 : 1) * l.groups;
  const int64_t per_byte = 8 / codec_bits(kind);
  l.payload = (n + per_byte - 1) / per_byte;
  return l;
}

struct CodecDraws {
  bool stochastic = false;
  uint64_t seed = 0, subsequence = 0, offset = 0;
};

// The uniform in (0, 1) stochastic rounding adds: half `half` (0: low 16 bits) of a Philox
// draw, (k + 1/2) / 2¹⁶ — mean exactly 1/2, so the rounding is unbiased up to 2⁻¹⁶ of a step.
LB_HD inline float codec_uniform(uint32_t draw, int half) {
  const uint32_t k = (draw >> (16 * half)) & 0xffffu;
  return (static_cast<float>(k) + 0.5f) * 1.52587890625e-5f;
}

// Scale of a group (symmetric: range = absmax; affine: max - min) and the factor codes are
// computed with. A constant group (range 0) gets scale 0 and factor 0: every code is 0 (the
// affine rounding adds u < 1 to 0), x̂ = the zero point.
LB_HD inline float codec_scale(float range, int levels) { return range > 0.f ? range / static_cast<float>(levels) : 0.f; }
LB_HD inline float codec_inverse(float scale) { return scale > 0.f ? 1.f / scale : 0.f; }

// The code of v (x / s or (x - min) / s), clamped to [lo, hi]; u = 1/2 rounds half up.
LB_HD inline int codec_code(float v, float u, int lo, int hi) {
  float q = floorf(v + u);
  q = q != q ? 0.f : q;  // NaN (a diverged step): code 0, not an undefined conversion
  q = q < static_cast<float>(lo) ? static_cast<float>(lo) : q;  // clamped before the conversion,
  q = q > static_cast<float>(hi) ? static_cast<float>(hi) : q;  // which then always fits
  return static_cast<int>(q);
}

// Kernels. x contiguous f32 or f64, `packed` a U8 tensor of layout.bytes() bytes on x's device.
struct CodecKernels {
  void (*pack)(const Tensor& x, Tensor& packed, const CodecLayout& layout, const CodecDraws& draws);
  void (*unpack)(const Tensor& packed, Tensor& x, const CodecLayout& layout);
};

// src/cpu/codec.cpp, cuda/codec.cu
LB_KERNEL_TABLES(CodecKernels, codec_kernels, kCpuCodec, kCudaCodec, "saved-tensor codec")

}  // namespace lb::backend
