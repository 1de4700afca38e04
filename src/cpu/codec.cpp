// CPU kernels of the kept-tensor codecs (src/backend/codec.h): the loops of codec_loops.inc,
// compiled for the baseline, for AVX2 and for AVX-512 (the widest the CPU has, chosen at run
// time), run over the threads in chunks of whole bytes of the payload.
#include "src/backend/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lb/core/dispatch.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/isa_target.h"
#include "src/cpu/philox_lanes.h"

namespace lb::backend {
namespace {

namespace portable {
#include "src/cpu/codec_loops.inc"
}  // namespace portable

LB_ISA_BEGIN_AVX2
namespace avx2 {
#include "src/cpu/codec_loops.inc"
}  // namespace avx2
LB_ISA_END

LB_ISA_BEGIN_AVX512
namespace avx512 {
#include "src/cpu/codec_loops.inc"
}  // namespace avx512
LB_ISA_END

// The same loop compiled for the widest instruction set enabled (cpu_features.h).
enum class Width { Portable, Avx2, Avx512 };
Width width() {
  if (cpu::isa_enabled(cpu::Isa::Avx512)) return Width::Avx512;
  return cpu::isa_enabled(cpu::Isa::Avx2) ? Width::Avx2 : Width::Portable;
}
#define LB_CODEC_CALL(w, fn, ...)                                                              \
  ((w) == Width::Avx512 ? avx512::fn(__VA_ARGS__)                                              \
                        : (w) == Width::Avx2 ? avx2::fn(__VA_ARGS__) : portable::fn(__VA_ARGS__))

constexpr int64_t kChunk = 1 << 14;  // elements per parallel task: a multiple of 8

template <typename T>
void pack_typed(const T* x, uint8_t* out, const CodecLayout& l, const CodecDraws& d) {
  const Width w = width();
  const int64_t chunks = (l.n + kChunk - 1) / kChunk;
  if (l.kind == CodecKind::BF16) {
    uint16_t* y = reinterpret_cast<uint16_t*>(out);
#pragma omp parallel for if (chunks > 1) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t i0 = c * kChunk, i1 = std::min(l.n, i0 + kChunk);
      LB_CODEC_CALL(w, bf16_encode_range, x, i0, i1, y);
    }
    return;
  }
  float* scale = reinterpret_cast<float*>(out);
  float* zero = codec_affine(l.kind) ? scale + l.groups : nullptr;
  uint8_t* payload = out + 4 * l.floats;
  const int64_t per_task = std::max<int64_t>(1, kChunk / l.group);
  const int64_t tasks = (l.groups + per_task - 1) / per_task;
  if (l.group % 8 == 0) {
    // Whole groups per task, each read twice while in cache (scale, then codes): a group
    // starts on a payload byte and an even element, as encode_range needs.
#pragma omp parallel for if (tasks > 1) schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t g0 = t * per_task, g1 = std::min(l.groups, g0 + per_task);
      const int64_t i0 = g0 * l.group, i1 = std::min(l.n, g1 * l.group);
      LB_CODEC_CALL(w, group_params, x, l, g0, g1, scale, zero);
      LB_CODEC_CALL(w, encode_range, x, l, scale, zero, d, i0, i1, payload);
    }
    return;
  }
  // Other group sizes: every scale first, then the codes in chunks of whole payload bytes.
#pragma omp parallel for if (tasks > 1) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t g0 = t * per_task, g1 = std::min(l.groups, g0 + per_task);
    LB_CODEC_CALL(w, group_params, x, l, g0, g1, scale, zero);
  }
#pragma omp parallel for if (chunks > 1) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * kChunk, i1 = std::min(l.n, i0 + kChunk);
    LB_CODEC_CALL(w, encode_range, x, l, scale, zero, d, i0, i1, payload);
  }
}

template <typename T>
void unpack_typed(const uint8_t* in, T* y, const CodecLayout& l) {
  const Width w = width();
  const int64_t chunks = (l.n + kChunk - 1) / kChunk;
  const float* scale = reinterpret_cast<const float*>(in);
  const float* zero = codec_affine(l.kind) ? scale + l.groups : nullptr;
  const uint8_t* payload = in + 4 * l.floats;
#pragma omp parallel for if (chunks > 1) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * kChunk, i1 = std::min(l.n, i0 + kChunk);
    if (l.kind == CodecKind::BF16)
      LB_CODEC_CALL(w, bf16_decode_range, reinterpret_cast<const uint16_t*>(in), i0, i1, y);
    else
      LB_CODEC_CALL(w, decode_range, payload, l, scale, zero, i0, i1, y);
  }
}

void pack(const Tensor& x, Tensor& packed, const CodecLayout& l, const CodecDraws& d) {
  detail::dispatch_float(x.dtype(), "codec pack", [&](auto tag) {
    using T = decltype(tag);
    pack_typed<T>(x.data<T>(), packed.data<uint8_t>(), l, d);
  });
}

void unpack(const Tensor& packed, Tensor& x, const CodecLayout& l) {
  detail::dispatch_float(x.dtype(), "codec unpack", [&](auto tag) {
    using T = decltype(tag);
    unpack_typed<T>(packed.data<uint8_t>(), x.data<T>(), l);
  });
}

}  // namespace

const CodecKernels kCpuCodec{pack, unpack};

}  // namespace lb::backend
