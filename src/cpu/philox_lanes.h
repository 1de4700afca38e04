// Internal: Philox4x32-10 for kLanes consecutive blocks at once (the round function of
// philox4x32_10 in lb/core/philox.h, laid out lane-parallel so GCC vectorizes it), and the
// dropout keep decisions built on it. Shared by dropout and the fused attention's dropout so
// both follow one randomness convention: draw number o of the stream (o = offset + element
// index) keeps its element iff philox_uniform(draw) > float(p).
#pragma once
#include <algorithm>
#include <cstdint>

#include "lb/core/philox.h"

namespace lb::detail {

constexpr int kPhiloxLanes = 16;  // blocks computed together (one AVX-512 register per word)

// out[4 l + w] = word w of block b0 + l, i.e. out[k] is draw number 4 b0 + k of the stream.
inline void philox_blocks(uint64_t b0, uint64_t subsequence, uint32_t key0, uint32_t key1,
                          uint32_t out[4 * kPhiloxLanes]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0[kPhiloxLanes], c1[kPhiloxLanes], c2[kPhiloxLanes], c3[kPhiloxLanes];
  for (int l = 0; l < kPhiloxLanes; ++l) {
    const uint64_t b = b0 + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(b);
    c1[l] = static_cast<uint32_t>(b >> 32);
    c2[l] = static_cast<uint32_t>(subsequence);
    c3[l] = static_cast<uint32_t>(subsequence >> 32);
  }
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int l = 0; l < kPhiloxLanes; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * c0[l];
      const uint64_t p1 = static_cast<uint64_t>(kM1) * c2[l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ key0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ key1;
      c1[l] = static_cast<uint32_t>(p1);
      c3[l] = static_cast<uint32_t>(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    key0 += kW0;
    key1 += kW1;
  }
  for (int l = 0; l < kPhiloxLanes; ++l) {
    out[4 * l] = c0[l];
    out[4 * l + 1] = c1[l];
    out[4 * l + 2] = c2[l];
    out[4 * l + 3] = c3[l];
  }
}

// keep[k] = 1 iff draw number o0 + k of the stream (seed, subsequence) keeps its element
// (uniform > p), for k in [0, n).
inline void dropout_keep_bytes(uint64_t seed, uint64_t subsequence, uint64_t o0, int64_t n,
                               float p, uint8_t* keep) {
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  const uint64_t o1 = o0 + static_cast<uint64_t>(n);
  for (uint64_t b = o0 >> 2; 4 * b < o1; b += kPhiloxLanes) {
    uint32_t words[4 * kPhiloxLanes];
    philox_blocks(b, subsequence, key0, key1, words);
    const uint64_t lo = std::max(o0, 4 * b), hi = std::min(o1, 4 * b + 4 * kPhiloxLanes);
    const uint32_t* w = words + (lo - 4 * b);
    uint8_t* kp = keep + (lo - o0);
    const int64_t len = static_cast<int64_t>(hi - lo);
#pragma omp simd
    for (int64_t k = 0; k < len; ++k) kp[k] = philox_uniform(w[k]) > p;
  }
}

}  // namespace lb::detail
