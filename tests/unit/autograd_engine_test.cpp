// Tape engine: fan-out, reuse, accumulation across backward calls, no_grad, retain_graph,
// release of saved tensors, and saved-bytes accounting.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

TEST(Autograd, FanOutAccumulates) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  x.set_requires_grad();
  Tensor y = sum(add(mul(x, x), x));  // d/dx = 2x + 1
  y.backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{3, 5, 7}));
}

TEST(Autograd, AccumulatesAcrossBackwardCalls) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  x.set_requires_grad();
  sum(mul_scalar(x, 3)).backward();
  sum(mul_scalar(x, 3)).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{6, 6}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  x.set_requires_grad();
  Tensor y;
  {
    NoGradGuard ng;
    y = mul(x, x);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, RetainGraphAndRelease) {
  Tensor x = Tensor::from_vector<double>({2}, {1});
  x.set_requires_grad();
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // second pass allowed
  EXPECT_NEAR(x.grad().item<double>(), 2 * std::exp(2.0), 1e-12);
  EXPECT_THROW(y.backward(), Error);  // saved tensors freed now
}

TEST(Autograd, DetachStopsGradient) {
  Tensor x = Tensor::from_vector<double>({3}, {1});
  x.set_requires_grad();
  Tensor y = sum(mul(x, x.detach()));
  y.backward();
  EXPECT_EQ(x.grad().item<double>(), 3.0);
}

TEST(Autograd, BroadcastGradientsSumBack) {
  Tensor a = testing::randn({4, 3}, 1);
  Tensor b = testing::randn({3}, 2);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return add(in[0], in[1]); },
                                 {a, b}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return div(in[0], in[1]); },
                                 {a, add_scalar(b, 3.0)}));
}

TEST(Autograd, SavedBytesCountsActivationsNotParameters) {
  ASSERT_EQ(autograd::saved_bytes(), 0);
  Tensor w = Tensor::empty({256}, DType::F32, Device::cpu(), MemTag::Parameter);
  w.fill_(0.5);
  w.set_requires_grad();
  Tensor x = Tensor::full({256}, 2.0);
  Tensor y = mul(x, w);      // saves x (activation, 1 KiB) and w (parameter, not counted)
  Tensor z = exp(y);         // saves its output (1 KiB)
  Tensor t = mul(z, x);      // saves z and x again: unique storages count once
  EXPECT_EQ(autograd::saved_bytes(), 2 * 256 * 4);
  sum(t).backward();
  EXPECT_EQ(autograd::saved_bytes(), 0);
}

TEST(Autograd, ViewsAreDifferentiable) {
  Tensor a = testing::randn({2, 3, 4}, 3);
  auto f = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return add(x.permute({2, 0, 1}).reshape({4, 6}).slice(1, 1, 5),
               x.transpose(0, 2).select(1, 1).unsqueeze(1).expand({4, 2, 2}).reshape({4, 4}));
  };
  EXPECT_TRUE(testing::gradcheck(f, {a}));
}

}  // namespace
}  // namespace lb

// The leaf-ready hook (data-parallel overlap): once per leaf per backward pass, when its
// gradient is final; a leaf used twice is reported after its last use; the last layer's
// weight before the first layer's.
TEST(Autograd, LeafGradReadyHookFiresOncePerLeafWhenComplete) {
  using lb::Tensor;
  Tensor w1 = Tensor::full({2, 2}, 0.5).set_requires_grad();
  Tensor w2 = Tensor::full({2, 2}, -1.0).set_requires_grad();
  Tensor x = Tensor::full({3, 2}, 2.0);
  std::vector<const lb::TensorImpl*> order;
  std::vector<std::vector<double>> at_hook;
  lb::autograd::set_leaf_grad_ready_hook([&](const lb::TensorImpl* leaf) {
    order.push_back(leaf);
    at_hook.push_back((leaf == w1.impl_ptr().get() ? w1 : w2).grad().to_double_vector());
  });
  // w1 feeds two products: its gradient completes only after both.
  Tensor h = lb::matmul(x, w1);
  Tensor y = lb::add(lb::matmul(h, w2), lb::matmul(x, w1));
  lb::sum(y).backward();
  lb::autograd::set_leaf_grad_ready_hook({});
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], w2.impl_ptr().get());
  EXPECT_EQ(order[1], w1.impl_ptr().get());
  EXPECT_EQ(at_hook[0], w2.grad().to_double_vector());
  EXPECT_EQ(at_hook[1], w1.grad().to_double_vector());
}
