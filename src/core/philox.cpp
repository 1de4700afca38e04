// PhiloxStream: the cuRAND Philox4_32_10 stream on the CPU. Draw number `offset` of
// subsequence `s` is word (offset mod 4) of philox(counter = (offset/4 as 64 bits, s as
// 64 bits), key = seed), exactly as curand_init(seed, s, offset) followed by curand().
#include <cmath>

#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/core/philox.h"

namespace lb {

PhiloxStream::PhiloxStream(uint64_t seed, uint64_t subsequence, uint64_t offset)
    : seed_(seed), subsequence_(subsequence), offset_(offset) {}

uint32_t PhiloxStream::next_u32() {
  const uint64_t block = offset_ >> 2;
  if (block != cached_block_) {
    const uint32_t ctr[4] = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                             static_cast<uint32_t>(subsequence_),
                             static_cast<uint32_t>(subsequence_ >> 32)};
    philox4x32_10(ctr, static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32), block_);
    cached_block_ = block;
  }
  return block_[offset_++ & 3];
}

float PhiloxStream::uniform() { return philox_uniform(next_u32()); }

float PhiloxStream::normal() {
  // curand_normal: Box–Muller on two draws, the second value kept for the next call.
  // The draws and u match cuRAND bit for bit (tests/unit/philox_test.cpp); the normals agree only
  // to a few ulps, since the device uses __sincosf and fuses v's multiply-add into an FMA.
  // The cached second value is not part of (subsequence, offset): a stream rebuilt from
  // its position restarts at a pair boundary.
  if (has_cached_normal_) {
    has_cached_normal_ = false;
    return cached_normal_;
  }
  const uint32_t x = next_u32(), y = next_u32();
  const float u = philox_uniform(x);
  const float v = static_cast<float>(y) * 1.4629180792671596e-09f + (1.4629180792671596e-09f / 2.0f);
  const float s = std::sqrt(-2.0f * std::log(u));
  cached_normal_ = s * std::cos(v);
  has_cached_normal_ = true;
  return s * std::sin(v);
}

void PhiloxStream::skip_normals(uint64_t n) {
  if (n > 0 && has_cached_normal_) {
    has_cached_normal_ = false;
    --n;
  }
  offset_ += 2 * (n / 2);  // whole pairs: each leaves nothing pending
  if (n % 2) normal();     // the last pair's first value drawn, its second pending
}

Tensor rand_uniform(const Shape& shape, PhiloxStream& rng, double lo, double hi, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  detail::dispatch_float(dtype, "rand_uniform", [&](auto tag_) { using T = decltype(tag_);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(lo + (hi - lo) * rng.uniform());
  });
  return t;
}

Tensor rand_normal(const Shape& shape, PhiloxStream& rng, double mean, double std, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  detail::dispatch_float(dtype, "rand_normal", [&](auto tag_) { using T = decltype(tag_);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(mean + std * rng.normal());
  });
  return t;
}

Tensor rand_bernoulli(const Shape& shape, double p, PhiloxStream& rng) {
  LB_CHECK(p >= 0.0 && p <= 1.0, "bernoulli probability ", p, " outside [0, 1]");
  Tensor t = Tensor::empty(shape, DType::Bool);
  auto* q = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) q[i] = rng.uniform() <= p;
  return t;
}

}  // namespace lb
