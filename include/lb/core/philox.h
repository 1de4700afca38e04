// Counter-based Philox4x32-10 RNG, the algorithm and stream layout of cuRAND's
// curand_init(seed, subsequence, offset) / curand_uniform / curand_normal, so CUDA kernels can
// reproduce the CPU stream exactly. The round function is __host__ __device__ (LB_HD) and
// shared by both sides.
#pragma once
#include <cstdint>

#include "lb/core/host_device.h"
#include "lb/core/tensor.h"

namespace lb {

struct PhiloxCounter {
  uint32_t c[4];
};

// One Philox4x32-10 block: 4 random words from a 128-bit counter and a 64-bit key.
LB_HD inline void philox4x32_10(const uint32_t ctr_in[4], uint32_t key0, uint32_t key1,
                                uint32_t out[4]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ key0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ key1;
    c3 = lo0;
    key0 += kW0;
    key1 += kW1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// u32 -> float in (0, 1], as curand_uniform.
LB_HD inline float philox_uniform(uint32_t x) {
  return static_cast<float>(x) * 2.3283064365386963e-10f + (2.3283064365386963e-10f / 2.0f);
}

// Draw number o of the stream (seed = key1:key0, subsequence): word o % 4 of block o / 4.
// Kernels that draw one element at a time (CUDA dropout, attention) use it.
LB_HD inline uint32_t philox_draw(uint64_t o, uint64_t subsequence, uint32_t key0, uint32_t key1) {
  const uint64_t b = o >> 2;
  const uint32_t ctr[4] = {static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32),
                           static_cast<uint32_t>(subsequence), static_cast<uint32_t>(subsequence >> 32)};
  uint32_t out[4];
  philox4x32_10(ctr, key0, key1, out);
  return out[o & 3];
}

// A sequential stream equivalent to a cuRAND Philox state after
// curand_init(seed, subsequence, offset, &state).
class PhiloxStream {
 public:
  explicit PhiloxStream(uint64_t seed = 0, uint64_t subsequence = 0, uint64_t offset = 0);
  uint32_t next_u32();
  float uniform();  // (0, 1], as curand_uniform
  float normal();   // N(0,1), Box–Muller as curand_normal
  uint64_t seed() const { return seed_; }
  // Moves past the draws n uniform() / normal() calls would make, leaving the stream where
  // they would (normal: with the same pending second value, which costs one pair's draw).
  void skip_uniforms(uint64_t n) { offset_ += n; }
  void skip_normals(uint64_t n);
  // Position, for checkpoints: (subsequence, offset in 32-bit draws).
  uint64_t subsequence() const { return subsequence_; }
  uint64_t offset() const { return offset_; }
  // Complete position, including a pending second Box–Muller value (for exact resume).
  struct State {
    uint64_t seed, subsequence, offset;
    bool has_cached_normal;
    float cached_normal;
  };
  State state() const { return {seed_, subsequence_, offset_, has_cached_normal_, cached_normal_}; }
  void set_state(const State& s) {
    *this = PhiloxStream(s.seed, s.subsequence, s.offset);
    has_cached_normal_ = s.has_cached_normal;
    cached_normal_ = s.cached_normal;
  }

 private:
  uint64_t seed_, subsequence_, offset_;
  uint64_t cached_block_ = ~0ull;  // block index whose 4 words are in block_
  uint32_t block_[4] = {0, 0, 0, 0};
  bool has_cached_normal_ = false;
  float cached_normal_ = 0.f;
};

// Fill new tensors from a stream (f32/f64; elements drawn in row-major order).
Tensor rand_uniform(const Shape& shape, PhiloxStream& rng, double lo = 0.0, double hi = 1.0,
                    DType dtype = DType::F32);
Tensor rand_normal(const Shape& shape, PhiloxStream& rng, double mean = 0.0, double std = 1.0,
                   DType dtype = DType::F32);
Tensor rand_bernoulli(const Shape& shape, double p, PhiloxStream& rng);  // bool, true w.p. p

}  // namespace lb
