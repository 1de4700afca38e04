// Finite-difference checks (f64) for the elementwise ops and reductions, plus error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lb/autograd/node.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

TEST(Gradcheck, Unary) {
  const Tensor x = testing::randn({3, 5}, 11);
  const Tensor pos = add_scalar(testing::rand({3, 5}, 12, 0.0, 1.0), 0.5);
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"neg", [](auto& v) { return neg(v[0]); }},
      {"exp", [](auto& v) { return exp(v[0]); }},
      {"tanh", [](auto& v) { return tanh(v[0]); }},
      {"sigmoid", [](auto& v) { return sigmoid(v[0]); }},
      {"gelu", [](auto& v) { return gelu(v[0]); }},
      {"gelu_tanh", [](auto& v) { return gelu(v[0], GeluApprox::Tanh); }},
      {"add_scalar", [](auto& v) { return add_scalar(v[0], 2.5); }},
      {"mul_scalar", [](auto& v) { return mul_scalar(v[0], -1.5); }},
      {"rsub_scalar", [](auto& v) { return rsub_scalar(v[0], 1.0); }},
  };
  for (auto& [name, f] : cases) EXPECT_TRUE(testing::gradcheck(f, {x})) << name;
  const std::vector<std::pair<const char*, Fn>> positive = {
      {"log", [](auto& v) { return log(v[0]); }},
      {"sqrt", [](auto& v) { return sqrt(v[0]); }},
      {"rsqrt", [](auto& v) { return rsqrt(v[0]); }},
      {"pow", [](auto& v) { return pow_scalar(v[0], 2.5); }},
  };
  for (auto& [name, f] : positive) EXPECT_TRUE(testing::gradcheck(f, {pos})) << name;
  // relu away from the kink at 0.
  Tensor off = add(x, mul_scalar(Tensor::from_vector<double>({1.0}, {1}), 0.0));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return relu(v[0]); }, {add_scalar(pos, -1.0)}));
}

TEST(Relu, SavesABitMaskAndMatchesTheDefinition) {
  // Lengths around the 16-lane vector body and the 8-element mask bytes, a non-contiguous
  // input (every second element of a leaf), NaN (-> 0, as x > 0 ? x : 0), and an exact zero
  // (gradient 0 at the kink).
  for (const int64_t n : {1, 7, 8, 15, 16, 17, 37, 100000}) {
    for (const DType dt : {DType::F32, DType::F64}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " " << dtype_name(dt));
      std::vector<double> base = testing::randn({n, 2}, 40 + n).to_double_vector();
      if (n > 3) base[2 * 3 + 1] = 0.0;
      if (n > 5) base[2 * 5 + 1] = std::nan("");
      Tensor leaf = Tensor::from_vector(base, {n, 2}).to(dt).set_requires_grad();
      const Tensor g = testing::randn({n}, 50 + n, dt);
      ASSERT_EQ(autograd::saved_bytes(), 0);
      const Tensor y = relu(leaf.select(1, 1));
      EXPECT_EQ(autograd::saved_bytes(), (n + 7) / 8);  // the mask, not the output
      y.backward(g);
      const std::vector<double> yv = y.to_double_vector(), gv = g.to_double_vector(),
                                dv = leaf.grad().to_double_vector();
      for (int64_t i = 0; i < n; ++i) {
        const double xi = base[2 * i + 1];
        const bool pos = xi > 0;
        ASSERT_EQ(yv[i], pos ? static_cast<double>(dt == DType::F32 ? static_cast<float>(xi) : xi) : 0.0) << i;
        ASSERT_EQ(dv[2 * i + 1], pos ? gv[i] : 0.0) << i;
        ASSERT_EQ(dv[2 * i], 0.0) << i;
      }
    }
  }
}

TEST(Gradcheck, BinaryBroadcast) {
  const Tensor a = testing::randn({2, 3, 4}, 21);
  const Tensor b = testing::randn({3, 1}, 22);
  const Tensor c = add_scalar(testing::rand({4}, 23, 0.0, 1.0), 1.0);
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return sub(v[0], v[1]); }, {a, b}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return mul(v[0], v[1]); }, {a, b}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return div(v[0], v[1]); }, {a, c}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return mul(v[0], v[0]); }, {b}));
}

TEST(Gradcheck, Reductions) {
  const Tensor x = testing::randn({3, 4, 5}, 31);
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return sum(v[0]); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return sum(v[0], {1}); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return sum(v[0], {0, 2}, true); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return mean(v[0], {-1}); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return max(v[0], 1); }, {x}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return sum_to(v[0], {4, 1}); }, {x}));
}

TEST(Reduce, Values) {
  Tensor x = Tensor::from_vector<float>({1, 5, 3, 7, 2, 2}, {2, 3});
  EXPECT_EQ(sum(x, {0}).to_double_vector(), (std::vector<double>{8, 7, 5}));
  EXPECT_EQ(sum(x, {1}).to_double_vector(), (std::vector<double>{9, 11}));
  EXPECT_EQ(max(x, 1).to_double_vector(), (std::vector<double>{5, 7}));
  EXPECT_EQ(argmax(x, 1).to_double_vector(), (std::vector<double>{1, 0}));
  EXPECT_EQ(argmax(x, 0, true).shape(), (Shape{1, 3}));
  EXPECT_NEAR(mean(x).item<float>(), 20.0 / 6, 1e-6);
}

TEST(Elementwise, ErrorsNameShapesAndDtypes) {
  Tensor a = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({4});
  try {
    add(a, b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
  }
  Tensor c = Tensor::zeros({2, 3}, DType::F64);
  try {
    mul(a, c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exp(Tensor::zeros({2}, DType::I64)), Error);
}

}  // namespace
}  // namespace lb
