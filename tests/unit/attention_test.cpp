// Fused attention (lb/ops/attention.h): values against naive loops and against the unfused
// composition (matmul, scale, masked softmax, dropout, matmul on permuted views) with the same
// Philox stream, gradients against that composition and by f64 finite differences (q, k, v
// and the mask, with and without dropout), strided inputs, fully masked rows, saved bytes,
// the stream position and error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "lb/nn/attention.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks '" << p << "': " << e.what();
  }
}

// The unfused composition the fused op replaces (the former nn::scaled_dot_product_attention).
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
               const Tensor& mask, double p, bool training, PhiloxStream& rng) {
  const int64_t B = q.size(0), Tq = q.size(1), Tk = k.size(1), H = q.size(2), d = H / heads;
  auto split = [&](const Tensor& x, int64_t T) {
    return x.view({B, T, heads, d}).permute({0, 2, 1, 3});
  };
  Tensor s = mul_scalar(matmul(split(q, Tq), split(k, Tk), false, true),
                        1.0 / std::sqrt(static_cast<double>(d)));
  Tensor probs = softmax(s, -1, mask);
  if (training && p > 0) probs = dropout(probs, p, true, rng);
  return matmul(probs, split(v, Tk)).permute({0, 2, 1, 3}).reshape({B, Tq, H});
}

struct Case {
  int64_t B, Tq, Tk, heads, d;
  Shape mask_shape;  // empty: no mask
  double p;
};

struct Inputs {
  Tensor q, k, v, mask;
};

Inputs make_inputs(const Case& c, DType dt, uint64_t seed) {
  const int64_t H = c.heads * c.d;
  Inputs in;
  in.q = testing::randn({c.B, c.Tq, H}, seed, dt);
  in.k = testing::randn({c.B, c.Tk, H}, seed + 1, dt);
  in.v = testing::randn({c.B, c.Tk, H}, seed + 2, dt);
  if (!c.mask_shape.empty()) in.mask = mul_scalar(testing::randn(c.mask_shape, seed + 3, dt), 2.0);
  return in;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> cs = {
      {2, 5, 5, 2, 3, {}, 0.0},              // plain self-attention
      {2, 5, 5, 2, 3, {2, 1, 1, 5}, 0.0},    // key-padding mask
      {2, 4, 6, 3, 2, {2, 3, 4, 6}, 0.0},    // cross-attention, full mask
      {1, 3, 7, 1, 4, {3, 7}, 0.3},          // mask broadcast over batch and heads, dropout
      {2, 6, 6, 2, 4, {2, 1, 1, 6}, 0.5},    // dropout with a padding mask
  };
  return cs;
}

TEST(Attention, ForwardMatchesNaiveLoops) {
  const Case c{2, 4, 5, 2, 3, {2, 1, 1, 5}, 0.0};
  const Inputs in = make_inputs(c, DType::F64, 1);
  PhiloxStream rng(7);
  const Tensor out = attention(in.q, in.k, in.v, c.heads, in.mask, 0.0, true, rng);
  const auto q = in.q.to_double_vector(), k = in.k.to_double_vector(), v = in.v.to_double_vector();
  const auto m = in.mask.to_double_vector();
  const int64_t H = c.heads * c.d;
  std::vector<double> ref(static_cast<size_t>(c.B * c.Tq * H));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.Tq; ++i) {
        std::vector<double> s(c.Tk);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < c.Tk; ++j) {
          double dot = 0;
          for (int64_t t = 0; t < c.d; ++t)
            dot += q[(b * c.Tq + i) * H + h * c.d + t] * k[(b * c.Tk + j) * H + h * c.d + t];
          s[j] = dot / std::sqrt(static_cast<double>(c.d)) + m[b * c.Tk + j];
          mx = std::max(mx, s[j]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int64_t t = 0; t < c.d; ++t) {
          double acc = 0;
          for (int64_t j = 0; j < c.Tk; ++j) acc += s[j] / sum * v[(b * c.Tk + j) * H + h * c.d + t];
          ref[(b * c.Tq + i) * H + h * c.d + t] = acc;
        }
      }
  EXPECT_TRUE(testing::all_close(out, Tensor::from_vector(ref, out.shape()), 1e-12, 1e-12));
  EXPECT_EQ(rng.offset(), 0u);  // no dropout: no draws
}

// Forward and every gradient equal the composition's, f64 and f32, dropout included (both
// draw from identically seeded streams and must leave them at the same position).
TEST(Attention, MatchesUnfusedCompositionWithGradients) {
  for (DType dt : {DType::F64, DType::F32}) {
    const double rtol = dt == DType::F64 ? 1e-11 : 2e-5, atol = dt == DType::F64 ? 1e-12 : 1e-6;
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " case Tq=" + std::to_string(c.Tq) +
                   " Tk=" + std::to_string(c.Tk) + " p=" + std::to_string(c.p));
      Inputs a = make_inputs(c, dt, 11), b = make_inputs(c, dt, 11);
      for (Inputs* in : {&a, &b})
        for (Tensor* t : {&in->q, &in->k, &in->v, &in->mask})
          if (t->defined()) t->set_requires_grad(true);
      PhiloxStream ra(5, 2, 100), rb(5, 2, 100);
      const Tensor ya = attention(a.q, a.k, a.v, c.heads, a.mask, c.p, true, ra);
      const Tensor yb = unfused(b.q, b.k, b.v, c.heads, b.mask, c.p, true, rb);
      EXPECT_TRUE(testing::all_close(ya, yb, rtol, atol));
      EXPECT_EQ(ra.offset(), rb.offset());
      const Tensor r = testing::randn(ya.shape(), 99, dt);
      sum(mul(ya, r)).backward();
      sum(mul(yb, r)).backward();
      EXPECT_TRUE(testing::all_close(a.q.grad(), b.q.grad(), rtol, atol)) << "dq";
      EXPECT_TRUE(testing::all_close(a.k.grad(), b.k.grad(), rtol, atol)) << "dk";
      EXPECT_TRUE(testing::all_close(a.v.grad(), b.v.grad(), rtol, atol)) << "dv";
      if (a.mask.defined())
        EXPECT_TRUE(testing::all_close(a.mask.grad(), b.mask.grad(), rtol, atol)) << "dmask";
    }
  }
}

// Large enough for the tile loop to run on several threads (and cpu::gemm single-threaded
// inside it); the composition runs its own parallel paths.
TEST(Attention, ParallelTilesMatchComposition) {
  const Case c{4, 64, 64, 4, 16, {4, 1, 1, 64}, 0.1};
  for (DType dt : {DType::F64, DType::F32}) {
    const double rtol = dt == DType::F64 ? 1e-11 : 1e-4, atol = dt == DType::F64 ? 1e-12 : 1e-5;
    Inputs a = make_inputs(c, dt, 21), b = make_inputs(c, dt, 21);
    for (Inputs* in : {&a, &b})
      for (Tensor* t : {&in->q, &in->k, &in->v}) t->set_requires_grad(true);
    PhiloxStream ra(3), rb(3);
    const Tensor ya = attention(a.q, a.k, a.v, c.heads, a.mask, c.p, true, ra);
    const Tensor yb = unfused(b.q, b.k, b.v, c.heads, b.mask, c.p, true, rb);
    EXPECT_TRUE(testing::all_close(ya, yb, rtol, atol));
    const Tensor r = testing::randn(ya.shape(), 98, dt);
    sum(mul(ya, r)).backward();
    sum(mul(yb, r)).backward();
    EXPECT_TRUE(testing::all_close(a.q.grad(), b.q.grad(), rtol, atol));
    EXPECT_TRUE(testing::all_close(a.k.grad(), b.k.grad(), rtol, atol));
    EXPECT_TRUE(testing::all_close(a.v.grad(), b.v.grad(), rtol, atol));
  }
}

TEST(Attention, Gradcheck) {
  for (const Case& c : cases()) {
    SCOPED_TRACE("Tq=" + std::to_string(c.Tq) + " Tk=" + std::to_string(c.Tk) +
                 " p=" + std::to_string(c.p));
    const Inputs in = make_inputs(c, DType::F64, 31);
    // A fresh stream per evaluation: the same dropout mask every time, so f is deterministic.
    const int64_t heads = c.heads;
    const double p = c.p;
    if (in.mask.defined()) {
      EXPECT_TRUE(testing::gradcheck(
          [heads, p](auto& t) {
            PhiloxStream rng(9);
            return attention(t[0], t[1], t[2], heads, t[3], p, true, rng);
          },
          {in.q, in.k, in.v, in.mask}));
    } else {
      EXPECT_TRUE(testing::gradcheck(
          [heads, p](auto& t) {
            PhiloxStream rng(9);
            return attention(t[0], t[1], t[2], heads, Tensor(), p, true, rng);
          },
          {in.q, in.k, in.v}));
    }
  }
  // Only some inputs needing a gradient (the others are constants).
  const Inputs in = make_inputs(cases()[1], DType::F64, 41);
  EXPECT_TRUE(testing::gradcheck(
      [in](auto& t) {
        PhiloxStream rng(1);
        return attention(in.q, t[0], in.v, 2, in.mask, 0.0, true, rng);
      },
      {in.k}));
  EXPECT_TRUE(testing::gradcheck(
      [in](auto& t) {
        PhiloxStream rng(1);
        return attention(in.q, in.k, t[0], 2, in.mask, 0.0, true, rng);
      },
      {in.v}));
}

// q, k, v as column slices of one fused (B, T, 3H) projection (strided rows, read in place)
// and as a transposed view (copied): same values and gradients as contiguous inputs.
TEST(Attention, StridedInputs) {
  const int64_t B = 2, T = 5, heads = 2, d = 3, H = heads * d;
  Tensor qkv = testing::randn({B, T, 3 * H}, 51);
  qkv.set_requires_grad(true);
  const auto parts = split(qkv, {H, H, H}, -1);
  PhiloxStream r1(2), r2(2);
  const Tensor y = attention(parts[0], parts[1], parts[2], heads, Tensor(), 0.2, true, r1);
  const Tensor qc = parts[0].detach().contiguous(), kc = parts[1].detach().contiguous(),
               vc = parts[2].detach().contiguous();
  const Tensor yc = attention(qc, kc, vc, heads, Tensor(), 0.2, true, r2);
  EXPECT_TRUE(testing::all_close(y, yc, 1e-13, 1e-13));
  EXPECT_TRUE(testing::gradcheck(
      [heads](auto& t) {
        PhiloxStream rng(4);
        const auto p = split(t[0], {6, 6, 6}, -1);
        return attention(p[0], p[1], p[2], heads, Tensor(), 0.2, true, rng);
      },
      {qkv.detach()}));
  // A transposed (B, H, T) buffer viewed as (B, T, H): unit stride is not along H.
  const Tensor qt = testing::randn({B, H, T}, 52).transpose(1, 2);
  PhiloxStream r3(0), r4(0);
  EXPECT_TRUE(testing::all_close(attention(qt, kc, vc, heads, Tensor(), 0.0, true, r3),
                                 attention(qt.contiguous(), kc, vc, heads, Tensor(), 0.0, true, r4),
                                 1e-13, 1e-13));
}

TEST(Attention, FullyMaskedRowGivesZerosWithoutNaN) {
  const double inf = std::numeric_limits<double>::infinity();
  // Query row 1 of batch 0 sees only -inf: a (B, 1, Tq, Tk) mask.
  std::vector<double> m(2 * 3 * 4, 0.0);
  for (int j = 0; j < 4; ++j) m[1 * 4 + j] = -inf;
  m[2 * 4 + 3] = -inf;  // and a partly masked row
  const Tensor mask = Tensor::from_vector(m, {2, 1, 3, 4});
  Tensor q = testing::randn({2, 3, 4}, 61), k = testing::randn({2, 4, 4}, 62),
         v = testing::randn({2, 4, 4}, 63);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  PhiloxStream rng(0);
  const Tensor y = attention(q, k, v, 2, mask, 0.0, true, rng);
  const auto yv = y.to_double_vector();
  for (double x : yv) EXPECT_FALSE(std::isnan(x));
  for (int t = 0; t < 4; ++t) EXPECT_EQ(yv[1 * 4 + t], 0.0);  // batch 0, query 1
  sum(y).backward();
  const auto gq = q.grad().to_double_vector();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(gq[1 * 4 + t], 0.0);
  for (double x : k.grad().to_double_vector()) EXPECT_FALSE(std::isnan(x));
}

TEST(Attention, EvalModeDrawsNothing) {
  const Inputs in = make_inputs(cases()[4], DType::F32, 71);
  PhiloxStream r1(8), r2(8);
  const Tensor a = attention(in.q, in.k, in.v, 2, in.mask, 0.5, false, r1);
  const Tensor b = attention(in.q, in.k, in.v, 2, in.mask, 0.0, true, r2);
  EXPECT_TRUE(testing::all_close(a, b, 0, 0));
  EXPECT_EQ(r1.offset(), 0u);
}

// Saved: q, k, v (the caller's tensors), the mask, 2 numbers per probability row and 1 bit
// per probability. The composition keeps the (B, heads, Tq, Tk) probabilities twice (softmax
// output, dropped probabilities for the second matmul) instead of the mask and row stats.
TEST(Attention, SavedBytes) {
  const int64_t B = 2, T = 16, heads = 2, d = 8, H = heads * d;
  Tensor q = testing::randn({B, T, H}, 81, DType::F32), k = testing::randn({B, T, H}, 82, DType::F32),
         v = testing::randn({B, T, H}, 83, DType::F32);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  const Tensor mask = testing::randn({B, 1, 1, T}, 84, DType::F32);
  const int64_t before = autograd::saved_bytes();
  PhiloxStream rng(1);
  Tensor y = attention(q, k, v, heads, mask, 0.1, true, rng);
  const int64_t saved = autograd::saved_bytes() - before;
  const int64_t qkv = 3 * B * T * H * 4, stats = B * heads * T * 2 * 4;
  const int64_t bits = B * heads * ((T * T + 7) / 8);
  EXPECT_EQ(saved, qkv + B * T * 4 + stats + bits);
  y = Tensor();
  PhiloxStream rng2(1);
  Tensor yu = unfused(q, k, v, heads, mask, 0.1, true, rng2);
  const int64_t probs = B * heads * T * T * 4;
  EXPECT_EQ(autograd::saved_bytes() - before, qkv + 2 * probs + bits);
  EXPECT_LT(saved, qkv + 2 * probs + bits);
}

TEST(Attention, Errors) {
  const Tensor q = testing::randn({2, 3, 4}, 1, DType::F32);
  PhiloxStream rng(0);
  expect_error([&] { attention(q.reshape({6, 4}), q, q, 2, Tensor(), 0, true, rng); },
               {"attention", "(B, Tq, H)", "(6, 4)"});
  expect_error([&] { attention(q, testing::randn({2, 3, 6}, 2, DType::F32), q, 2, Tensor(), 0, true, rng); },
               {"attention", "(2, 3, 6)"});
  expect_error([&] { attention(q, q, q, 3, Tensor(), 0, true, rng); },
               {"attention", "not divisible", "3"});
  expect_error([&] { attention(q, q, q, 2, testing::randn({2, 1, 1, 3}, 3, DType::F64), 0, true, rng); },
               {"attention", "mask", "f64"});
  expect_error([&] { attention(q, q, q, 2, testing::randn({2, 1, 1, 5}, 3, DType::F32), 0, true, rng); },
               {"attention", "does not broadcast", "(2, 1, 1, 5)"});
  expect_error([&] { attention(q, q, q, 2, Tensor(), 1.5, true, rng); }, {"attention", "dropout", "1.5"});
  expect_error([&] { attention(q, q, q.to(DType::F64), 2, Tensor(), 0, true, rng); },
               {"attention", "dtype"});
}

// nn::SelfAttention runs the fused op: dropout draws come from the default generator.
TEST(Attention, SelfAttentionModuleUsesFusedOp) {
  nn::SelfAttention attn(8, 2, 0.0);
  const Tensor x = testing::randn({2, 3, 8}, 91, DType::F32);
  const Tensor y = attn.forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 8}));
}


// Padding-free layout: pack keeps the kept tokens in batch-major order, unpack puts them
// back with zero rows at the padding, first_tokens picks each [CLS].
TEST(TokenPacking, PackUnpackRoundTrip) {
  const Tensor keep = Tensor::from_vector<int64_t>({1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 4});
  const auto p = nn::TokenPacking::from_keep_mask(keep);
  EXPECT_EQ(p.tokens(), 7);
  EXPECT_TRUE(p.has_padding());
  EXPECT_TRUE(p.keeps_first_tokens());
  EXPECT_EQ(p.positions().to_double_vector(), (std::vector<double>{0, 1, 2, 3, 0, 1, 0}));
  ASSERT_TRUE(p.keeps_prefixes());  // right padded: the sequences' offsets in the packed row
  EXPECT_EQ(*p.sequence_offsets(), (std::vector<int64_t>{0, 4, 6, 7}));
  const Tensor x = testing::randn({3, 4, 2}, 5);
  const Tensor packed = p.pack(x);
  ASSERT_EQ(packed.shape(), (Shape{1, 7, 2}));
  const auto xv = x.to_double_vector(), pv = packed.to_double_vector();
  const int src_rows[7] = {0, 1, 2, 3, 4, 5, 8};
  for (int r = 0; r < 7; ++r) {
    const int src = src_rows[r];
    EXPECT_EQ(pv[2 * r], xv[2 * src]);
    EXPECT_EQ(pv[2 * r + 1], xv[2 * src + 1]);
  }
  const Tensor back = p.unpack(packed);
  ASSERT_EQ(back.shape(), (Shape{3, 4, 2}));
  const auto bv = back.to_double_vector();
  const auto kv = keep.to_double_vector();
  for (int i = 0; i < 12; ++i)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(bv[2 * i + h], kv[i] ? xv[2 * i + h] : 0.0) << i;
  const auto first = p.first_tokens(packed).to_double_vector();  // rows 0, 4, 6 of packed
  ASSERT_EQ(first.size(), 6u);
  for (int b = 0; b < 3; ++b)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(first[2 * b + h], pv[2 * (b == 0 ? 0 : b == 1 ? 4 : 6) + h]);
  // Integer inputs (token ids) pack too.
  EXPECT_EQ(p.pack(Tensor::arange(12).reshape({3, 4})).to_double_vector(),
            (std::vector<double>{0, 1, 2, 3, 4, 5, 8}));
}

TEST(TokenPacking, MaskedFirstTokenAndNoPadding) {
  const auto p = nn::TokenPacking::from_keep_mask(Tensor::from_vector<int64_t>({0, 1, 1, 1}, {2, 2}));
  EXPECT_FALSE(p.keeps_first_tokens());
  EXPECT_FALSE(p.keeps_prefixes());
  EXPECT_EQ(p.sequence_offsets(), nullptr);
  // A hole (a kept token after a padded one) is not a prefix either.
  const auto holes = nn::TokenPacking::from_keep_mask(Tensor::from_vector<int64_t>({1, 0, 1, 1, 1, 0}, {2, 3}));
  EXPECT_TRUE(holes.keeps_first_tokens());
  EXPECT_FALSE(holes.keeps_prefixes());
  const auto full = nn::TokenPacking::from_keep_mask(Tensor::ones({2, 3}, DType::I64));
  EXPECT_TRUE(full.keeps_prefixes());
  EXPECT_FALSE(full.has_padding());
  expect_error([&] { (void)full.unpack(testing::randn({5, 2}, 1)); }, {"token packing", "(1, 6, H)", "(5, 2)"});
}

// The packed module equals the padded one on kept tokens, gradients included (f64).
TEST(TokenPacking, SelfAttentionPackedEqualsPadded) {
  nn::SelfAttention attn(8, 2, 0.0);
  attn.to(DType::F64);
  const Tensor keep = Tensor::from_vector<int64_t>({1, 1, 1, 1, 1, 1, 0, 0}, {2, 4});
  const auto p = nn::TokenPacking::from_keep_mask(keep);
  const Tensor mask = nn::additive_attention_mask(keep, DType::F64);
  const Tensor x = testing::randn({2, 4, 8}, 17);
  const Tensor r = testing::randn({1, 6, 8}, 18);
  const Tensor padded = p.pack(attn.forward(x, mask));
  sum(mul(padded, r)).backward();
  std::vector<Tensor> want;
  for (auto q : attn.parameters()) {
    want.push_back(q.grad().clone());
    q.zero_grad();
  }
  const Tensor packed = attn.forward_packed(p.pack(x), mask, p);
  EXPECT_TRUE(testing::all_close(packed, padded, 1e-12, 1e-12));
  sum(mul(packed, r)).backward();
  const auto params = attn.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(testing::all_close(params[i].grad(), want[i], 1e-10, 1e-12)) << i;
}

}  // namespace
}  // namespace lb
