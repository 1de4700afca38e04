// Philox4x32-10 and PhiloxStream: Random123's published known-answer vectors, the cuRAND
// stream layout (curand_init(seed, subsequence, offset) + curand()), the (0, 1] uniform
// mapping, statistics of uniform/normal/bernoulli draws, and determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lb/core/philox.h"
#include "testing/testing.h"

namespace lb {
namespace {

// ---------------------------------------------------------------- known answers

// Random123 1.14, tests/kat_vectors, the three "philox4x32 10" lines:
//   counter (4 words), key (2 words) -> output (4 words).
struct Kat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t out[4];
};
constexpr Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, Random123KnownAnswers) {
  for (const Kat& k : kKats) {
    uint32_t out[4];
    philox4x32_10(k.ctr, k.key[0], k.key[1], out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], k.out[i]) << "ctr[0]=" << std::hex << k.ctr[0] << " word " << i;
  }
}

TEST(Philox, StreamStartIsTheZeroKnownAnswer) {
  // Seed 0, subsequence 0, offset 0: counter 0 and key 0, i.e. the first KAT, word by word;
  // the fifth draw is the next counter block.
  PhiloxStream s(0, 0, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.next_u32(), kKats[0].out[i]) << i;
  uint32_t next[4];
  const uint32_t ctr1[4] = {1, 0, 0, 0};
  philox4x32_10(ctr1, 0, 0, next);
  EXPECT_EQ(s.next_u32(), next[0]);
}

// ---------------------------------------------------------------- cuRAND layout
//
// cuRAND's Philox4_32_10 state (curand_kernel.h / curand_philox4x32_x.h, CUDA 13) is a
// 128-bit counter ctr = (x, y, z, w) (x least significant), a key (seed low 32 bits, seed
// high 32 bits), the current block output = philox(ctr, key) and an index STATE in 0..3.
//   - curand_init(seed, subsequence, offset) zeroes ctr and STATE, then
//     skipahead_sequence(subsequence) adds `subsequence` to the high 64 bits (z, w), and
//     skipahead(offset) adds offset mod 4 to STATE and offset / 4 to the low 64 bits (x, y)
//     (carrying one more block if STATE passed 3, which cannot happen from STATE = 0).
//   - curand() returns word STATE of the output and increments STATE; after word 3 the
//     128-bit counter is incremented and STATE returns to 0.
// So draw k after curand_init(seed, s, o) is word (o + k) mod 4 of
// philox(counter = s * 2^64 + (o + k) / 4, key = seed), i.e. subsequences are 2^66 draws
// long and the offset skips within a 4-word block. The reference below implements that
// closed form with 128-bit integer arithmetic, independently of PhiloxStream's cached-block
// loop. (Within one subsequence the low 64 bits never wrap: o / 4 + k / 4 < 2^64 for any
// reachable uint64 offset, so cuRAND's carry into z, w never happens.)
uint32_t curand_reference(uint64_t seed, uint64_t subsequence, uint64_t offset, uint64_t k) {
  using u128 = unsigned __int128;
  const u128 pos = static_cast<u128>(offset) + k;  // draw index within the subsequence
  const u128 ctr = (static_cast<u128>(subsequence) << 64) + (pos >> 2);
  const uint32_t c[4] = {static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32),
                         static_cast<uint32_t>(ctr >> 64), static_cast<uint32_t>(ctr >> 96)};
  uint32_t out[4];
  philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), out);
  return out[static_cast<int>(pos & 3)];
}

TEST(Philox, StreamMatchesCurandLayout) {
  const uint64_t seeds[] = {0, 42, 0x0123456789abcdefull, ~0ull};
  const uint64_t subs[] = {0, 1, 7, (1ull << 32) + 5, ~0ull};
  const uint64_t offs[] = {0, 1, 2, 3, 4, 5, 1001, (1ull << 33) + 2, (1ull << 62) + 3};
  for (uint64_t seed : seeds)
    for (uint64_t sub : subs)
      for (uint64_t off : offs) {
        PhiloxStream s(seed, sub, off);
        EXPECT_EQ(s.seed(), seed);
        EXPECT_EQ(s.subsequence(), sub);
        for (uint64_t k = 0; k < 11; ++k)
          ASSERT_EQ(s.next_u32(), curand_reference(seed, sub, off, k))
              << "seed " << seed << " subsequence " << sub << " offset " << off << " draw " << k;
        EXPECT_EQ(s.offset(), off + 11);
      }
}

TEST(Philox, OffsetSkipsWithinBlockAndSubsequencesDiffer) {
  // Starting at offset o equals drawing o values and discarding them.
  PhiloxStream a(99, 3, 0);
  std::vector<uint32_t> seq;
  for (int i = 0; i < 12; ++i) seq.push_back(a.next_u32());
  for (uint64_t o = 0; o < 8; ++o) {
    PhiloxStream b(99, 3, o);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(b.next_u32(), seq[o + i]) << "offset " << o;
  }
  // Neighbouring subsequences and seeds give unrelated streams.
  PhiloxStream c(99, 4, 0), d(100, 3, 0);
  int same_c = 0, same_d = 0;
  for (int i = 0; i < 12; ++i) {
    same_c += c.next_u32() == seq[i];
    same_d += d.next_u32() == seq[i];
  }
  EXPECT_EQ(same_c, 0);
  EXPECT_EQ(same_d, 0);
}

// The single-draw function the CUDA kernels use is the stream's draw o, across block and
// 32-bit counter boundaries.
TEST(Philox, SingleDrawIsTheStreamsDraw) {
  const uint64_t seed = 0x1234'5678'9abc'def0ull, sub = 0x1'0000'0007ull;
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (uint64_t o : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{1000003}, (uint64_t{1} << 34) - 2}) {
    PhiloxStream st(seed, sub, o);
    for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ(philox_draw(o + i, sub, key0, key1), st.next_u32()) << "draw " << o + i;
  }
}

// ---------------------------------------------------------------- uniform and normal

TEST(Philox, UniformMappingIsCurandUniform) {
  // curand_uniform: x * 2^-32 + 2^-33, in (0, 1]; CURAND_2POW32_INV == 2^-32 exactly in f32,
  // so the product is exact and FMA contraction (nvcc) cannot change the result.
  EXPECT_EQ(philox_uniform(0), std::ldexp(1.0f, -33));
  EXPECT_EQ(philox_uniform(0xffffffffu), 1.0f);
  EXPECT_EQ(philox_uniform(1u << 31), 0.5f + std::ldexp(1.0f, -33));
  for (uint32_t x : {1u, 12345u, 0x7fffffffu, 0x80000001u, 0xfffffff0u}) {
    const double exact = (static_cast<double>(static_cast<float>(x)) + 0.5) * std::ldexp(1.0, -32);
    EXPECT_EQ(philox_uniform(x), static_cast<float>(exact)) << x;
  }
  PhiloxStream s(5, 0, 0), raw(5, 0, 0);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(s.uniform(), philox_uniform(raw.next_u32()));
}

// Mean, variance and (for normals) 4th moment and the ±1σ mass of n draws.
struct Moments {
  double mean = 0, var = 0, kurt = 0, within1 = 0, min = INFINITY, max = -INFINITY;
};
template <typename Draw>
Moments moments(int64_t n, Draw&& draw) {
  std::vector<double> v(n);
  Moments m;
  for (auto& x : v) {
    x = draw();
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= n;
  double m4 = 0;
  for (double x : v) {
    const double d = x - m.mean;
    m.var += d * d;
    m4 += d * d * d * d;
    m.within1 += std::abs(x) <= 1.0;
  }
  m.var /= n;
  m.kurt = m4 / n / (m.var * m.var);
  m.within1 /= n;
  return m;
}

constexpr int64_t kN = 1 << 20;

TEST(Philox, UniformStatistics) {
  PhiloxStream s(2024, 1, 0);
  const Moments m = moments(kN, [&] { return static_cast<double>(s.uniform()); });
  EXPECT_GT(m.min, 0.0);
  EXPECT_LE(m.max, 1.0);
  // 5-sigma bounds: Var(mean) = 1/12/n; Var of the sample variance ≈ (1/80 - 1/144)/n.
  EXPECT_NEAR(m.mean, 0.5, 5 * std::sqrt(1.0 / 12 / kN));
  EXPECT_NEAR(m.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / kN));
  // Equal mass in 16 bins (chi-square with 15 dof; 45 is far in the tail, p < 1e-4).
  PhiloxStream t(2024, 2, 0);
  std::vector<int64_t> bins(16, 0);
  for (int64_t i = 0; i < kN; ++i) ++bins[std::min<int>(15, static_cast<int>(t.uniform() * 16))];
  double chi2 = 0;
  for (int64_t b : bins) chi2 += (b - kN / 16.0) * (b - kN / 16.0) / (kN / 16.0);
  EXPECT_LT(chi2, 45.0);
}

TEST(Philox, NormalIsCurandBoxMuller) {
  // curand_normal: from draws x, y: u = uniform(x), v = y * 2π·2^-32 + π·2^-32,
  // returns sqrt(-2 ln u)·sin v, then (cached) sqrt(-2 ln u)·cos v; two draws per pair.
  PhiloxStream s(77, 0, 0), raw(77, 0, 0);
  for (int pair = 0; pair < 50; ++pair) {
    const uint32_t x = raw.next_u32(), y = raw.next_u32();
    // x, y enter as floats (as in cuRAND), so u matches exactly and only ln/sin/cos differ.
    const double u = (static_cast<double>(static_cast<float>(x)) + 0.5) * std::ldexp(1.0, -32);
    const double v = (static_cast<double>(static_cast<float>(y)) + 0.5) * std::ldexp(2 * M_PI, -32);
    const double r = std::sqrt(-2 * std::log(u));
    const float n0 = s.normal(), n1 = s.normal();
    // f32 arithmetic: relative error a few ulps of the inputs, amplified near u = 1.
    EXPECT_NEAR(n0, r * std::sin(v), 2e-5 * (1 + r)) << pair;
    EXPECT_NEAR(n1, r * std::cos(v), 2e-5 * (1 + r)) << pair;
    EXPECT_EQ(s.offset(), raw.offset());
  }
}

TEST(Philox, NormalStatistics) {
  PhiloxStream s(31337, 0, 0);
  const Moments m = moments(kN, [&] { return static_cast<double>(s.normal()); });
  EXPECT_NEAR(m.mean, 0.0, 5 / std::sqrt(double(kN)));
  EXPECT_NEAR(m.var, 1.0, 5 * std::sqrt(2.0 / kN));
  EXPECT_NEAR(m.kurt, 3.0, 5 * std::sqrt(24.0 / kN));
  const double p1 = std::erf(1 / std::sqrt(2.0));  // 0.6827
  EXPECT_NEAR(m.within1, p1, 5 * std::sqrt(p1 * (1 - p1) / kN));
  // Box–Muller from u >= 2^-33 caps |z| at sqrt(-2 ln 2^-33) ≈ 6.763.
  EXPECT_LT(m.max, 6.77);
  EXPECT_GT(m.min, -6.77);
}

TEST(Philox, TensorFillsFollowTheStream) {
  PhiloxStream a(8, 0, 0), b(8, 0, 0);
  const Tensor u = rand_uniform({3, 5}, a, -2.0, 3.0, DType::F64);
  const auto uv = u.to_double_vector();
  for (double x : uv) EXPECT_DOUBLE_EQ(x, -2.0 + 5.0 * b.uniform());
  for (double x : uv) {
    EXPECT_GT(x, -2.0);
    EXPECT_LE(x, 3.0);
  }
  const Tensor n = rand_normal({4, 4}, a, 1.5, 0.5, DType::F32);
  EXPECT_EQ(n.dtype(), DType::F32);
  for (double x : n.to_double_vector())
    EXPECT_FLOAT_EQ(static_cast<float>(x), static_cast<float>(1.5 + 0.5 * b.normal()));
  EXPECT_EQ(a.offset(), b.offset());
  // Normal fills with large n have the requested mean and std.
  PhiloxStream c(9, 0, 0);
  const auto big = rand_normal({kN}, c, -3.0, 2.0, DType::F64).to_double_vector();
  const Moments m = moments(kN, [&, i = size_t(0)]() mutable { return big[i++]; });
  EXPECT_NEAR(m.mean, -3.0, 5 * 2.0 / std::sqrt(double(kN)));
  EXPECT_NEAR(m.var, 4.0, 5 * 4.0 * std::sqrt(2.0 / kN));
  EXPECT_THROW(rand_uniform({2}, c, 0, 1, DType::I32), Error);
  EXPECT_THROW(rand_normal({2}, c, 0, 1, DType::BF16), Error);
}

TEST(Philox, BernoulliRate) {
  for (double p : {0.03, 0.3, 0.5, 0.9}) {
    PhiloxStream s(123, 0, 0);
    const Tensor t = rand_bernoulli({kN}, p, s);
    EXPECT_EQ(t.dtype(), DType::Bool);
    const auto* q = static_cast<const uint8_t*>(t.raw_data());
    int64_t ones = 0;
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_LE(q[i], 1);
      ones += q[i];
    }
    EXPECT_NEAR(static_cast<double>(ones) / kN, p, 5 * std::sqrt(p * (1 - p) / kN)) << p;
  }
  PhiloxStream s(1, 0, 0);
  for (double x : rand_bernoulli({1000}, 0.0, s).to_double_vector()) ASSERT_EQ(x, 0.0);
  for (double x : rand_bernoulli({1000}, 1.0, s).to_double_vector()) ASSERT_EQ(x, 1.0);
  EXPECT_THROW(rand_bernoulli({2}, -0.1, s), Error);
  EXPECT_THROW(rand_bernoulli({2}, 1.5, s), Error);
  EXPECT_THROW(rand_bernoulli({2}, NAN, s), Error);
}

TEST(Philox, Deterministic) {
  auto draw = [](uint64_t seed, uint64_t sub) {
    PhiloxStream s(seed, sub, 0);
    return rand_normal({64}, s, 0, 1, DType::F64).to_double_vector();
  };
  EXPECT_EQ(draw(1, 0), draw(1, 0));
  EXPECT_NE(draw(1, 0), draw(2, 0));
  EXPECT_NE(draw(1, 0), draw(1, 1));
  // Drawing 40 + 40 continues the stream exactly like drawing 80 at once.
  PhiloxStream a(5, 2, 1), b(5, 2, 1);
  const auto first = rand_uniform({40}, a).to_double_vector();
  const auto second = rand_uniform({40}, a).to_double_vector();
  const auto all = rand_uniform({80}, b).to_double_vector();
  EXPECT_EQ(std::vector<double>(all.begin(), all.begin() + 40), first);
  EXPECT_EQ(std::vector<double>(all.begin() + 40, all.end()), second);
  // A stream rebuilt from (seed, subsequence, offset) continues the u32 sequence.
  PhiloxStream c(5, 2, a.offset());
  EXPECT_EQ(c.next_u32(), a.next_u32());
  // testing::randn is seeded and reproducible.
  EXPECT_EQ(testing::randn({3, 3}, 17).to_double_vector(), testing::randn({3, 3}, 17).to_double_vector());
}

}  // namespace
}  // namespace lb
