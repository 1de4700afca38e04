// Scalar quantisation formulas shared by the CPU kernels (src/cpu/quantize.cpp), their scalar
// reference, and CUDA kernels (LB_HD = __host__ __device__ under nvcc), so every backend
// rounds the same values to the same integers and parity tests can be exact.
//
// Conventions (HOT, docs/algorithms.md):
//  - Symmetric levels: b bits -> integers in [-qmax, qmax], qmax = 2^(b-1) - 1 (7 or 127;
//    -2^(b-1) is never used). The scale is s = absmax / qmax; values are multiplied by
//    inv = qmax / absmax (0 when absmax is 0: everything quantises to 0).
//  - Round-to-nearest: v = clamp(x·inv, ±qmax), q = rint(v) (ties to even, as torch.round).
//  - Stochastic rounding: v = clamp(x·inv, ±qmax), q = floor(v) + [r < v - floor(v)] with
//    r = (u >> 8)·2^-24 in [0, 1) from one 32-bit Philox draw u: unbiased up to 2^-24.
//  - Random draws: element e of a quantised tensor takes draw e of the Philox stream
//    curand_init(seed, subsequence, e), i.e. word (e mod 4) of philox4x32_10 with counter
//    (e/4 as 64 bits, subsequence as 64 bits) and key = seed. The subsequence packs
//    (step, layer id, tensor id): bits 63..32 step, 31..8 layer id, 7..0 tensor id.
#pragma once
#include <cmath>
#include <cstdint>

#include "lb/core/philox.h"

namespace lb::quant {

LB_HD constexpr int qmax_for_bits(int bits) { return (1 << (bits - 1)) - 1; }

LB_HD inline float inv_scale_from_absmax(float absmax, int qmax) {
  return absmax > 0.f ? static_cast<float>(qmax) / absmax : 0.f;
}
LB_HD inline float scale_from_absmax(float absmax, int qmax) {
  return absmax / static_cast<float>(qmax);
}

LB_HD inline float clamp_level(float v, int qmax) {
  const float m = static_cast<float>(qmax);
  return ::fminf(::fmaxf(v, -m), m);
}

LB_HD inline int8_t quantize_rtn(float x, float inv, int qmax) {
  return static_cast<int8_t>(static_cast<int>(::rintf(clamp_level(x * inv, qmax))));
}

// r in [0, 1) from the top 24 bits of a draw (exact in float).
LB_HD inline float draw_unit(uint32_t u) { return static_cast<float>(u >> 8) * 5.9604644775390625e-8f; }

LB_HD inline int8_t quantize_sr(float x, float inv, int qmax, uint32_t u) {
  const float v = clamp_level(x * inv, qmax);
  const float fl = ::floorf(v);
  return static_cast<int8_t>(static_cast<int>(fl) + (draw_unit(u) < v - fl ? 1 : 0));
}

// SAWB clip (the HOT reference's 4-bit coefficients): c = 12.1·sqrt(E[x²]) - 12.2·E[|x|].
// It is <= 0 for near-constant magnitudes; callers then fall back to absmax.
LB_HD inline float sawb_clip(double mean_sq, double mean_abs) {
  return static_cast<float>(12.1 * ::sqrt(mean_sq) - 12.2 * mean_abs);
}

// Philox stream of one quantised tensor.
struct PhiloxKey {
  uint32_t key0 = 0, key1 = 0;  // seed
  uint32_t sub0 = 0, sub1 = 0;  // subsequence: counter words 2 and 3
};

// `micro` numbers the backward calls of one layer within one optimizer step (gradient
// accumulation: each micro-batch draws afresh); 0 leaves the key as the seed.
LB_HD inline PhiloxKey philox_key(uint64_t seed, int64_t step, int64_t layer_id, int tensor_id,
                                  int64_t micro = 0) {
  PhiloxKey k;
  k.key0 = static_cast<uint32_t>(seed);
  k.key1 = static_cast<uint32_t>(seed >> 32) ^ (static_cast<uint32_t>(micro) * 0x9E3779B9u);
  k.sub0 = (static_cast<uint32_t>(layer_id) << 8) | (static_cast<uint32_t>(tensor_id) & 0xFFu);
  k.sub1 = static_cast<uint32_t>(step);
  return k;
}

// Draw e of the stream (one Philox block per call: the scalar reference; kernels reuse blocks).
LB_HD inline uint32_t philox_draw(const PhiloxKey& k, uint64_t e) {
  const uint64_t block = e >> 2;
  const uint32_t ctr[4] = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), k.sub0,
                           k.sub1};
  uint32_t out[4];
  philox4x32_10(ctr, k.key0, k.key1, out);
  return out[e & 3];
}

// Unnormalised 16-point Walsh–Hadamard transform of a[0..15] in place, natural (Sylvester)
// order: the butterflies a+b / a-b by stage h = 1, 2, 4, 8. The CPU's vector kernels perform
// the same float operations in the same order, so every backend gets the same bits.
LB_HD inline void fwht16_block(float* a) {
  for (int h = 1; h < 16; h <<= 1)
    for (int i = 0; i < 16; ++i)
      if (!(i & h)) {
        const float u = a[i], v = a[i + h];
        a[i] = u + v;
        a[i + h] = u - v;
      }
}

// Sequency (number of sign changes) of row `row` of the natural-order Sylvester Hadamard
// matrix of size n: H[row][t] = (-1)^popcount(row & t).
LB_HD inline int hadamard_sequency(int row, int n) {
  int changes = 0;
  int prev = 0;
  for (int t = 0; t < n; ++t) {
    int bits = row & t, parity = 0;
    while (bits) {
      parity ^= bits & 1;
      bits >>= 1;
    }
    if (t > 0 && parity != prev) ++changes;
    prev = parity;
  }
  return changes;
}

}  // namespace lb::quant
