// bf16 storage of saved activations under bf16 products (lb/autograd/saved_operand.h): every
// op that keeps a product operand gives the same gradients bit for bit with the bf16 copy as
// with the f32 tensor (the products round it anyway) at half its bytes on the tape; GELU's
// rounded input and a Winograd convolution's input stay within their documented bounds; an
// input shared by several layers is converted and counted once; f32 precision keeps f32.
#include <gtest/gtest.h>

#include <functional>

#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/precision.h"
#include "lb/core/philox.h"
#include "lb/nn/backward/factory.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Pass {
  std::vector<Tensor> grads;
  int64_t saved = 0;  // bytes on the tape after forward
};

// f on fresh leaf copies of `inputs` (those listed in `params` tagged as parameters, as a
// module's are), under bf16 products with bf16 saving on or off; the loss is Σ r ⊙ f.
Pass run(const Fn& f, const std::vector<Tensor>& inputs, const std::vector<size_t>& params,
        bool saving, MatmulPrecision precision = MatmulPrecision::BF16) {
  MatmulPrecisionScope p(precision);
  autograd::Bf16SavingScope s(saving);
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = inputs[i].clone();
    for (size_t j : params)
      if (j == i) t.storage()->set_tag(MemTag::Parameter);
    leaves.push_back(t.set_requires_grad(true));
  }
  const int64_t before = autograd::saved_bytes();
  const Tensor y = f(leaves);
  Pass r;
  r.saved = autograd::saved_bytes() - before;
  sum(mul(y, testing::randn(y.shape(), 99, DType::F32))).backward();
  for (const Tensor& t : leaves) r.grads.push_back(t.grad());
  return r;
}

void expect_same_grads(const Pass& a, const Pass& b) {
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_TRUE(testing::all_close(a.grads[i], b.grads[i], 0, 0)) << "input " << i;
}

Tensor f32(const Shape& s, uint64_t seed) { return testing::randn(s, seed, DType::F32); }

std::shared_ptr<nn::backward::Strategy> vanilla() {
  return nn::backward::make_strategy({{"type", "vanilla"}}, "test");
}

TEST(SavedOperand, StrategyLinearKeepsItsInputAsBf16) {
  const Tensor x = f32({2, 8, 32}, 1), w = f32({16, 32}, 2), b = f32({16}, 3);
  const auto s = vanilla();
  const Fn f = [&](const std::vector<Tensor>& in) { return nn::backward::strategy_linear(in[0], in[1], in[2], s); };
  const Pass on = run(f, {x, w, b}, {1, 2}, true), off = run(f, {x, w, b}, {1, 2}, false);
  expect_same_grads(on, off);
  EXPECT_EQ(off.saved, 2 * 8 * 32 * 4);
  EXPECT_EQ(on.saved, 2 * 8 * 32 * 2);
  // f32 products keep f32 whatever the switch says
  EXPECT_EQ(run(f, {x, w, b}, {1, 2}, true, MatmulPrecision::F32).saved, 2 * 8 * 32 * 4);
}

TEST(SavedOperand, SharedInputIsConvertedAndCountedOnce) {
  const Tensor x = f32({2, 8, 32}, 4), wq = f32({32, 32}, 5), wk = f32({32, 32}, 6), wv = f32({32, 32}, 7);
  const auto sq = vanilla(), sk = vanilla(), sv = vanilla();
  const Fn f = [&](const std::vector<Tensor>& in) {  // query, key, value projections of one x
    using nn::backward::strategy_linear;
    return add(add(strategy_linear(in[0], in[1], Tensor(), sq), strategy_linear(in[0], in[2], Tensor(), sk)),
               strategy_linear(in[0], in[3], Tensor(), sv));
  };
  const Pass on = run(f, {x, wq, wk, wv}, {1, 2, 3}, true), off = run(f, {x, wq, wk, wv}, {1, 2, 3}, false);
  expect_same_grads(on, off);
  EXPECT_EQ(off.saved, 2 * 8 * 32 * 4);
  EXPECT_EQ(on.saved, 2 * 8 * 32 * 2);
}

TEST(SavedOperand, CopyIsNotReusedOnceReleased) {
  MatmulPrecisionScope p(MatmulPrecision::BF16);
  Tensor x = f32({4, 64}, 8);
  Tensor c1 = autograd::keep_product_operand(x), c2 = autograd::keep_product_operand(x);
  EXPECT_EQ(c1.dtype(), DType::BF16);
  EXPECT_EQ(c1.storage(), c2.storage());  // while held: one copy
  c1 = c2 = Tensor();
  x.fill_(3.0);  // the same storage, new values
  const Tensor c3 = autograd::saved_f32(autograd::keep_product_operand(x));
  EXPECT_TRUE(testing::all_close(c3, Tensor::full({4, 64}, 3.0), 0, 0));
  // parameters stay as they are
  Tensor w = f32({4, 4}, 9);
  w.storage()->set_tag(MemTag::Parameter);
  EXPECT_EQ(autograd::keep_product_operand(w).storage(), w.storage());
}

TEST(SavedOperand, LinearAndMatmulOps) {
  const Tensor x = f32({3, 5, 24}, 10), w = f32({12, 24}, 11), b = f32({12}, 12);
  const Fn lin = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  const Pass lon = run(lin, {x, w, b}, {1, 2}, true), loff = run(lin, {x, w, b}, {1, 2}, false);
  expect_same_grads(lon, loff);
  EXPECT_EQ(lon.saved * 2, loff.saved);
  const Tensor a = f32({3, 5, 7}, 13), c = f32({3, 7, 4}, 14);
  const Fn mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  const Pass mon = run(mm, {a, c}, {}, true), moff = run(mm, {a, c}, {}, false);
  expect_same_grads(mon, moff);
  EXPECT_EQ(moff.saved, (3 * 5 * 7 + 3 * 7 * 4) * 4);
  EXPECT_EQ(mon.saved * 2, moff.saved);
}

TEST(SavedOperand, AttentionKeepsQueryKeyValueAsBf16) {
  const int64_t B = 2, T = 16, heads = 2, H = 16;
  const Tensor q = f32({B, T, H}, 15), k = f32({B, T, H}, 16), v = f32({B, T, H}, 17);
  const Tensor mask = f32({B, 1, 1, T}, 18);
  const Fn f = [&](const std::vector<Tensor>& in) {
    PhiloxStream rng(3);  // the same dropout draws in both runs
    return attention(in[0], in[1], in[2], heads, mask, 0.1, true, rng);
  };
  const Pass on = run(f, {q, k, v}, {}, true), off = run(f, {q, k, v}, {}, false);
  expect_same_grads(on, off);
  EXPECT_EQ(off.saved - on.saved, 3 * B * T * H * 2);
}

TEST(SavedOperand, Im2colConvolutionIsExact) {
  // stride 2: the im2col path, whose filter gradient is one product of x's columns
  const Tensor x = f32({2, 8, 9, 9}, 19), w = f32({6, 8, 3, 3}, 20), b = f32({6}, 21);
  Conv2dArgs args;
  args.stride = {2, 2};
  args.padding = {1, 1};
  const auto s = vanilla();
  const Fn strat = [&](const std::vector<Tensor>& in) { return nn::backward::strategy_conv2d(in[0], in[1], in[2], args, s); };
  const Fn op = [&](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], args); };
  for (const Fn* f : {&strat, &op}) {
    const Pass on = run(*f, {x, w, b}, {1, 2}, true), off = run(*f, {x, w, b}, {1, 2}, false);
    expect_same_grads(on, off);
    EXPECT_EQ(off.saved, 2 * 8 * 9 * 9 * 4);
    EXPECT_EQ(on.saved, 2 * 8 * 9 * 9 * 2);
  }
}

TEST(SavedOperand, WinogradConvolutionWithinOneMoreRounding) {
  // 3×3 stride 1 with 32 → 16 channels: Winograd F(2×2, 3×3); the input's bf16 copy is one
  // rounding more (≤ 2⁻⁸ relative per element) before the transformed products
  const Tensor x = f32({2, 32, 8, 8}, 22), w = f32({16, 32, 3, 3}, 23);
  Conv2dArgs args;
  args.padding = {1, 1};
  const auto s = vanilla();
  const Fn f = [&](const std::vector<Tensor>& in) { return nn::backward::strategy_conv2d(in[0], in[1], Tensor(), args, s); };
  const Pass on = run(f, {x, w}, {1}, true), off = run(f, {x, w}, {1}, false);
  EXPECT_TRUE(testing::all_close(on.grads[0], off.grads[0], 0, 0));  // g_x does not use x
  // The one more rounding adds little to the bf16 products' own error against f32 products
  // (measured: 0.43% against 0.39% relative).
  const Pass exact = run(f, {x, w}, {1}, true, MatmulPrecision::F32);
  const double e_on = testing::rel_error(on.grads[1], exact.grads[1]);
  const double e_off = testing::rel_error(off.grads[1], exact.grads[1]);
  EXPECT_GT(e_on, e_off);
  EXPECT_LT(e_on, 1.25 * e_off);
  EXPECT_EQ(on.saved * 2, off.saved);
}

TEST(SavedOperand, GeluDerivativeWithinItsBound) {
  // x spread over GELU's curved part; |Δgelu'(x)| ≤ 0.34·2⁻⁸ for x's bf16 rounding
  const Tensor x = mul(f32({4096}, 24), Tensor::scalar(2.0));
  const Fn f = [](const std::vector<Tensor>& in) { return gelu(in[0]); };
  const Fn ft = [](const std::vector<Tensor>& in) { return gelu(in[0], GeluApprox::Tanh); };
  const Tensor r = testing::randn({4096}, 99, DType::F32);  // the loss weights run() uses
  for (const Fn* g : {&f, &ft}) {
    const Pass on = run(*g, {x}, {}, true), off = run(*g, {x}, {}, false);
    EXPECT_EQ(on.saved * 2, off.saved);
    const auto a = on.grads[0].to_double_vector(), e = off.grads[0].to_double_vector();
    const auto rv = r.to_double_vector();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - e[i]) / std::abs(rv[i]));
    EXPECT_GT(worst, 0.0);
    EXPECT_LT(worst, 0.34 / 256 + 1e-6);
  }
}

// GELU's backward reads its bf16 input as it is: the gradient is exactly the one at the
// bf16-rounded input kept in f32.
TEST(SavedOperand, GeluGradientIsTheOneAtTheRoundedInput) {
  const Tensor x = mul(f32({4099}, 25), Tensor::scalar(2.0));
  const Tensor x16 = x.to(DType::BF16).to(DType::F32);
  for (GeluApprox a : {GeluApprox::None, GeluApprox::Tanh}) {
    const Fn f = [a](const std::vector<Tensor>& in) { return gelu(in[0], a); };
    const Pass on = run(f, {x}, {}, true), off = run(f, {x16}, {}, false);
    EXPECT_TRUE(testing::all_close(on.grads[0], off.grads[0], 0, 0));
  }
}

}  // namespace
}  // namespace lb
