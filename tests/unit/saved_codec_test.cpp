// Kept-tensor codecs (lb/autograd/saved_codec.h): each codec's round-trip error stays within
// its bound (bf16: 2⁻⁸ relative; integer codecs: half a step rounding half up, one step
// stochastically); stochastic rounding is unbiased; the bytes are reproducible from the key;
// under a scope the tape keeps the encodings (fewer bytes, one copy of a tensor several nodes
// keep, and the producer's encoding where exact lean keeps it for a Linear), backward gets
// them decoded, f32 rules change nothing bit for bit, and gradients stay within loose
// finite-difference tolerances; the CUDA kernels give the CPU's bytes (skips without a device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lb/autograd/node.h"
#include "lb/autograd/saved_codec.h"
#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using autograd::Codec;
using autograd::CodecSpec;

// The per-element bound of |x̂ - x| for x's group under `spec` (group g of `group` elements).
std::vector<double> bounds(const std::vector<double>& x, const CodecSpec& spec, int64_t group) {
  std::vector<double> b(x.size());
  if (spec.codec == Codec::BF16) {
    for (size_t i = 0; i < x.size(); ++i) b[i] = std::ldexp(std::fabs(x[i]), -8) + 1e-30;
    return b;
  }
  const double levels = spec.codec == Codec::Int8 ? 127 : spec.codec == Codec::Int4 ? 15 : 3;
  for (size_t g0 = 0; g0 < x.size(); g0 += static_cast<size_t>(group)) {
    const size_t g1 = std::min(x.size(), g0 + static_cast<size_t>(group));
    double lo = x[g0], hi = x[g0], amax = 0;
    for (size_t i = g0; i < g1; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
      amax = std::max(amax, std::fabs(x[i]));
    }
    const double step = (spec.codec == Codec::Int8 ? amax : hi - lo) / levels;
    // Half a step (one step stochastically), plus f32 rounding of the formulas.
    const double bound = (spec.stochastic ? 1.0 : 0.5) * step * (1 + 1e-5) + 1e-6 * amax;
    for (size_t i = g0; i < g1; ++i) b[i] = bound;
  }
  return b;
}

TEST(SavedCodec, RoundTripStaysWithinEachCodecsBound) {
  for (Codec c : {Codec::BF16, Codec::Int8, Codec::Int4, Codec::Int2})
    for (bool stochastic : {false, true})
      for (int64_t group : {int64_t{128}, int64_t{7}, int64_t{0}})
        for (const Shape& shape : {Shape{3, 41}, Shape{2, 3, 256}, Shape{1}, Shape{5000}})
          for (DType dt : {DType::F32, DType::F64}) {
            const CodecSpec spec{c, group, stochastic};
            const Tensor x = testing::randn(shape, 7, dt);
            const Tensor e = autograd::encode(x, spec, 11, 2, 3);
            ASSERT_TRUE(autograd::is_encoded(e));
            const Tensor y = autograd::decode(e);
            ASSERT_EQ(y.shape(), x.shape());
            ASSERT_EQ(y.dtype(), x.dtype());
            const int64_t g = group == 0 ? shape.back() : group;
            const auto xv = x.to_double_vector(), yv = y.to_double_vector();
            const auto b = bounds(xv, spec, g);
            for (size_t i = 0; i < xv.size(); ++i)
              ASSERT_LE(std::fabs(yv[i] - xv[i]), b[i])
                  << autograd::codec_name(c) << (stochastic ? " stochastic" : "") << " group " << group << " element "
                  << i << ": " << xv[i] << " -> " << yv[i];
          }
}

TEST(SavedCodec, BytesFollowTheLayout) {
  const Tensor x = testing::randn({4, 256}, 3, DType::F32);  // 1024 elements, 8 groups of 128
  EXPECT_EQ(autograd::encode(x, {Codec::BF16, 128, false}).numel(), 2048);
  EXPECT_EQ(autograd::encode(x, {Codec::Int8, 128, false}).numel(), 1024 + 8 * 4);
  EXPECT_EQ(autograd::encode(x, {Codec::Int4, 128, false}).numel(), 512 + 8 * 8);
  EXPECT_EQ(autograd::encode(x, {Codec::Int2, 0, false}).numel(), 256 + 4 * 8);  // per row: 4 groups
  EXPECT_FALSE(autograd::is_encoded(x));
  EXPECT_EQ(autograd::decode(x).storage(), x.storage());  // not an encoding: itself
}

TEST(SavedCodec, StochasticRoundingIsUnbiasedAndRoundingHalfUpIsNot) {
  // Values 0.1 and 0.45 of a step above a code: rounding half up always rounds them down.
  const int64_t n = 64, trials = 4000;
  std::vector<double> xv(n);
  for (int64_t i = 0; i < n; ++i) xv[i] = static_cast<double>(i % 3) + (i % 2 ? 0.45 : 0.1);
  xv[0] = 0.0;
  xv[1] = 3.0;  // min 0 and max 3 pin the int2 group's step to exactly 1
  Tensor x = Tensor::zeros({n}, DType::F64);
  for (int64_t i = 0; i < n; ++i) x.data<double>()[i] = xv[static_cast<size_t>(i)];
  for (Codec c : {Codec::Int8, Codec::Int4, Codec::Int2}) {
    std::vector<double> mean(n, 0.0);
    for (int64_t t = 0; t < trials; ++t) {
      const auto y = autograd::decode(autograd::encode(x, {c, n, true}, 5, 1, static_cast<uint64_t>(t) * n))
                         .to_double_vector();
      for (int64_t i = 0; i < n; ++i) mean[i] += y[i] / trials;
    }
    const double step = c == Codec::Int8 ? 3.0 / 127 : c == Codec::Int4 ? 3.0 / 15 : 1.0;
    // The mean of `trials` draws of a two-point variable of spread `step`: sd ≤ step / 2 / √trials.
    const double tol = 5 * step / 2 / std::sqrt(static_cast<double>(trials));
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(mean[i], xv[i], tol) << autograd::codec_name(c) << " element " << i;
  }
  // Rounding half up of int2: 0.45 above a code goes down, a bias of 0.45.
  const auto y = autograd::decode(autograd::encode(x, {Codec::Int2, n, false})).to_double_vector();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(y[i] - xv[i]));
  EXPECT_GT(worst, 0.4);
}

// f() with LEANBACK_ISA set to `isa` (the codec loops are compiled per instruction set).
template <typename F>
auto with_isa(const char* isa, F&& f) {
  testing::ScopedIsa scope(isa);
  return f();
}

TEST(SavedCodec, EveryInstructionSetGivesTheSameBytes) {
  const Tensor x = testing::randn({3, 5000}, 13, DType::F32);
  for (Codec c : {Codec::BF16, Codec::Int8, Codec::Int4, Codec::Int2})
    for (bool stochastic : {false, true})
      for (int64_t group : {int64_t{128}, int64_t{7}}) {
        const CodecSpec spec{c, group, stochastic};
        auto run = [&] {
          const Tensor e = autograd::encode(x, spec, 3, 1, 5);
          return std::make_pair(e.to_double_vector(), autograd::decode(e).to_double_vector());
        };
        const auto portable = with_isa("portable", run);
        for (const char* isa : {"avx2", "amx"}) {  // amx: the widest the CPU has
          const auto wide = with_isa(isa, run);
          EXPECT_EQ(wide.first, portable.first) << autograd::codec_name(c) << " group " << group << " " << isa;
          EXPECT_EQ(wide.second, portable.second) << autograd::codec_name(c) << " group " << group << " " << isa;
        }
      }
}

TEST(SavedCodec, TheKeyDecidesTheBytes) {
  const Tensor x = testing::randn({3000}, 9, DType::F32);
  auto bytes = [&](uint64_t seed, uint64_t sub, uint64_t off) {
    return autograd::encode(x, {Codec::Int4, 64, true}, seed, sub, off).to_double_vector();
  };
  EXPECT_EQ(bytes(1, 2, 3), bytes(1, 2, 3));
  EXPECT_NE(bytes(1, 2, 3), bytes(1, 2, 4));
  EXPECT_NE(bytes(1, 2, 3), bytes(1, 3, 3));
  EXPECT_NE(bytes(1, 2, 3), bytes(2, 2, 3));
}

// Σ r ⊙ linear(gelu(linear(x, w1)), w2) with leaf copies; returns the gradients and the bytes
// the tape keeps after the forward.
struct Pass {
  std::vector<Tensor> grads;
  int64_t saved = 0;
};
Pass mlp(const std::vector<Tensor>& inputs, DType dt) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.to(dt).clone().set_requires_grad(true));
  leaves[1].storage()->set_tag(MemTag::Parameter);
  leaves[2].storage()->set_tag(MemTag::Parameter);
  const int64_t before = autograd::saved_bytes();
  const Tensor h = linear(leaves[0], leaves[1]);
  const Tensor y = linear(gelu(h), leaves[2]);
  Pass p;
  p.saved = autograd::saved_bytes() - before;
  sum(mul(y, testing::randn(y.shape(), 99, dt))).backward();
  for (const Tensor& t : leaves) p.grads.push_back(t.grad());
  return p;
}

std::vector<Tensor> mlp_inputs() {
  return {testing::randn({16, 32}, 1), testing::randn({64, 32}, 2), testing::randn({8, 64}, 3)};
}

double cosine(const Tensor& a, const Tensor& b) {
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  double xy = 0, xx = 0, yy = 0;
  for (size_t i = 0; i < x.size(); ++i) xy += x[i] * y[i], xx += x[i] * x[i], yy += y[i] * y[i];
  return xy / std::sqrt(xx * yy);
}

TEST(SavedCodec, TheTapeKeepsTheEncodingAndBackwardDecodesIt) {
  const auto in = mlp_inputs();
  const Pass exact = mlp(in, DType::F32);
  // f32 rules, and rules matching nothing, change nothing, bit for bit.
  for (const char* op : {"gelu", "no_such_op"}) {
    auto rules = std::make_shared<autograd::CodecRules>(
        std::vector<autograd::CodecRule>{{"*", op, "*", {std::string(op) == "gelu" ? Codec::F32 : Codec::Int2}}});
    autograd::SavedCodecScope scope(rules, 42, 0);
    const Pass same = mlp(in, DType::F32);
    EXPECT_EQ(same.saved, exact.saved);
    for (size_t i = 0; i < in.size(); ++i)
      EXPECT_EQ(same.grads[i].to_double_vector(), exact.grads[i].to_double_vector()) << op << " input " << i;
  }
  // GELU's input (16 × 64 f32 = 4096 bytes) as int8 per row: 1024 + 16 · 4 bytes. The second
  // Linear keeps it too (exact lean) — the same encoding, not a second copy.
  auto rules = std::make_shared<autograd::CodecRules>(
      std::vector<autograd::CodecRule>{{"*", "gelu", "input", {Codec::Int8, 0, false}}});
  autograd::SavedCodecScope scope(rules, 42, 0);
  const Pass coded = mlp(in, DType::F32);
  EXPECT_EQ(coded.saved, exact.saved - 4096 + 1024 + 16 * 4);
  EXPECT_EQ(rules->matches(), std::vector<int64_t>{1});
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_NE(coded.grads[i].to_double_vector(), exact.grads[i].to_double_vector()) << "input " << i;
    EXPECT_GT(cosine(coded.grads[i], exact.grads[i]), 0.999) << "input " << i;
  }
}

TEST(SavedCodec, ATensorSeveralNodesKeepIsEncodedOnce) {
  auto rules = std::make_shared<autograd::CodecRules>(std::vector<autograd::CodecRule>{{"*", "*", "*", {Codec::Int8}}});
  Tensor x = testing::randn({1024}, 4, DType::F32).set_requires_grad(true);
  Tensor a = testing::randn({1024}, 5, DType::F32).set_requires_grad(true);
  autograd::SavedCodecScope scope(rules, 1, 0);
  const int64_t before = autograd::saved_bytes();
  const Tensor y = add(mul(x, a), mul(a, mul(x, x)));  // x kept by three products, a by two
  // x and a: 1024 int8 + 8 scales each; x*x (kept by the last product): one more.
  EXPECT_EQ(autograd::saved_bytes() - before, 3 * (1024 + 8 * 4));
  sum(y).backward();
  const auto g = x.grad().to_double_vector(), xv = x.to_double_vector(), av = a.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], av[i] * (1 + 2 * xv[i]), 0.1 * (1 + std::fabs(g[i])));
}

TEST(SavedCodec, GradientsPassFiniteDifferencesWithinTheCodecsError) {
  // f64 forward and finite differences; the analytic side reads tensors rounded by the codec.
  // Tolerances: each kept tensor is off by up to half a step (int8: absmax / 254 of a row of
  // 16, about 0.01 here), and a gradient element sums four rows of such errors.
  const std::vector<std::pair<Codec, double>> cases{{Codec::BF16, 2e-2}, {Codec::Int8, 8e-2}};
  for (const auto& [codec, tol] : cases) {
    auto rules = std::make_shared<autograd::CodecRules>(std::vector<autograd::CodecRule>{{"*", "*", "*", {codec, 0, false}}});
    autograd::SavedCodecScope scope(rules, 3, 0);
    const auto f = [](const std::vector<Tensor>& t) {
      return linear(gelu(layer_norm(t[0], t[1], t[2])), t[3]);
    };
    EXPECT_TRUE(testing::gradcheck(f,
                                   {testing::randn({4, 16}, 1), testing::rand({16}, 2, 0.5, 1.5),
                                    testing::randn({16}, 3), testing::randn({5, 16}, 4)},
                                   1e-6, tol, tol))
        << autograd::codec_name(codec);
  }
}

TEST(SavedCodec, CudaGivesTheCpusBytes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const Device cuda = Device::cuda(0);
  for (Codec c : {Codec::BF16, Codec::Int8, Codec::Int4, Codec::Int2})
    for (bool stochastic : {false, true})
      for (int64_t group : {int64_t{128}, int64_t{7}, int64_t{0}})
        for (DType dt : {DType::F32, DType::F64}) {
          const Tensor x = testing::randn({3, 1001}, 8, dt);
          const CodecSpec spec{c, group, stochastic};
          const Tensor ec = autograd::encode(x, spec, 4, 5, 6), eg = autograd::encode(x.to(cuda), spec, 4, 5, 6);
          const std::string what = std::string(autograd::codec_name(c)) + (stochastic ? " sr" : "") + " group " +
                                   std::to_string(group) + " " + dtype_name(dt);
          EXPECT_EQ(eg.to(Device::cpu()).to_double_vector(), ec.to_double_vector()) << what;
          EXPECT_EQ(autograd::decode(eg).to(Device::cpu()).to_double_vector(), autograd::decode(ec).to_double_vector())
              << what;
        }
}

}  // namespace
}  // namespace lb
