// Block-wise dynamic quantization of optimizer state (see state_codec.h).
#include "lb/optim/state_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lb/core/error.h"

namespace lb::optim {

namespace {

// The ascending magnitudes of a table: decades 0 .. decades-1, decade i holding 2^(top - i)
// values 10^-i · (0.1 + 0.9 (k+1) / n), k < n; the smallest decades first.
std::vector<float> decade_magnitudes(int decades, int top) {
  std::vector<float> m;
  for (int i = decades - 1; i >= 0; --i) {
    const int n = 1 << (top - i);
    const double scale = std::pow(10.0, -i);
    for (int k = 0; k < n; ++k) m.push_back(static_cast<float>(scale * (0.1 + 0.9 * (k + 1) / n)));
  }
  return m;
}

// The table of one codec, and the lookup that finds a magnitude's nearest value fast: for each
// cell of positive floats sharing their top 16 bits, the index of the value nearest the cell's
// lower end; the nearest to y is then at most a few steps up (the nearest index only grows
// with y).
struct Table {
  std::vector<float> values;      // by code
  std::vector<float> magnitudes;  // ascending
  std::vector<uint16_t> start;    // per top-16-bit cell of |y| in [0, 1]
  int mag_bits = 0;

  explicit Table(const StateCodec& c) {
    mag_bits = c.is_signed ? c.bits - 1 : c.bits;
    if (c.is_signed) {
      magnitudes = {0.0f};
      const auto d = decade_magnitudes(mag_bits, mag_bits - 1);
      magnitudes.insert(magnitudes.end(), d.begin(), d.end());
    } else {
      magnitudes = decade_magnitudes(mag_bits, mag_bits - 1);
      // 2^b - 1 values so far; the last code halves the smallest (still not zero).
      magnitudes.insert(magnitudes.begin(), magnitudes.front() / 2);
    }
    LB_CHECK(static_cast<int64_t>(magnitudes.size()) == (int64_t{1} << mag_bits), "state codec: table size");
    values.resize(size_t{1} << c.bits);
    for (size_t q = 0; q < values.size(); ++q) {
      const size_t mag = q & ((size_t{1} << mag_bits) - 1);
      const bool negative = c.is_signed && (q >> mag_bits);
      values[q] = negative ? -magnitudes[mag] : magnitudes[mag];
    }
    const uint32_t cells = bits_of(1.0f) >> 16;
    start.resize(cells + 1);
    size_t at = 0;
    for (uint32_t cell = 0; cell <= cells; ++cell) {
      float lo;
      const uint32_t b = cell << 16;
      std::memcpy(&lo, &b, sizeof lo);
      at = walk(at, lo);
      start[cell] = static_cast<uint16_t>(at);
    }
  }

  static uint32_t bits_of(float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  }

  // The nearest magnitude index to y from `from` up (ties to the smaller).
  size_t walk(size_t from, float y) const {
    while (from + 1 < magnitudes.size() && std::fabs(magnitudes[from + 1] - y) < std::fabs(magnitudes[from] - y))
      ++from;
    return from;
  }

  // The magnitude index of y in [0, 1] (any NaN-free y; above 1 clamps).
  size_t nearest(float y) const {
    if (!(y < 1.0f)) return magnitudes.size() - 1;
    return walk(start[bits_of(y) >> 16], y);
  }

  // The magnitude index of y rounded stochastically with u in [0, 1): between the values
  // around y, up with probability (y - lower) / (upper - lower). Below the smallest value
  // (the unsigned table), up.
  size_t stochastic(float y, float u) const {
    size_t i = nearest(y);
    if (magnitudes[i] > y) {
      if (i == 0) return 0;
      --i;
    }
    if (i + 1 == magnitudes.size()) return i;
    const float lo = magnitudes[i], hi = magnitudes[i + 1];
    return u * (hi - lo) < y - lo ? i + 1 : i;
  }
};

// A uniform draw in [0, 1) from (seed, i): splitmix64's finaliser, 24 bits.
float uniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

const Table& table(const StateCodec& c) {
  static const Table s8({8, true, 256}), u8({8, false, 256}), s4({4, true, 128}), u4({4, false, 128});
  if (c.bits == 8) return c.is_signed ? s8 : u8;
  LB_CHECK(c.bits == 4, "optimizer state codec: ", c.bits, " bits; 8 or 4 are known");
  return c.is_signed ? s4 : u4;
}

}  // namespace

StateCodec moment_codec(int bits) {
  LB_CHECK(bits == 8 || bits == 4, "optimizer state: ", bits, " bits; 8 or 4 are known");
  return {bits, true, bits == 8 ? 256 : 128};
}

StateCodec second_moment_codec(int bits) {
  StateCodec c = moment_codec(bits);
  c.is_signed = false;
  return c;
}

const std::vector<float>& code_values(const StateCodec& c) { return table(c).values; }

int64_t num_blocks(const StateCodec& c, int64_t n) { return (n + c.block - 1) / c.block; }

int64_t code_bytes(const StateCodec& c, int64_t n) { return c.bits == 8 ? n : (n + 1) / 2; }

float encode_block(const StateCodec& c, const float* x, int64_t n, uint8_t* q, uint64_t seed) {
  const Table& t = table(c);
  float absmax = 0;
  for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(x[i]));
  const float inv = absmax > 0 ? 1.0f / absmax : 0.0f;
  const uint32_t sign_bit = c.is_signed ? 1u << t.mag_bits : 0u;
  for (int64_t i = 0; i < n; ++i) {
    // The unsigned table has no zero: 0 takes its smallest value (tiny beside A).
    const float y = std::fabs(x[i]) * inv;
    uint32_t code = static_cast<uint32_t>(c.bits == 8 ? t.nearest(y) : t.stochastic(y, uniform(seed, static_cast<uint64_t>(i))));
    if (x[i] < 0) code |= sign_bit;
    if (c.bits == 8) {
      q[i] = static_cast<uint8_t>(code);
    } else if (i % 2 == 0) {
      q[i / 2] = static_cast<uint8_t>(code);
    } else {
      q[i / 2] = static_cast<uint8_t>(q[i / 2] | (code << 4));
    }
  }
  return absmax;
}

void decode_block(const StateCodec& c, const uint8_t* q, float absmax, int64_t n, float* out) {
  const float* v = table(c).values.data();
  if (c.bits == 8) {
    for (int64_t i = 0; i < n; ++i) out[i] = v[q[i]] * absmax;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = v[(q[i / 2] >> (4 * (i % 2))) & 15] * absmax;
  }
}

}  // namespace lb::optim
