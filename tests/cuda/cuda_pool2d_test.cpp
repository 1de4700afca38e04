// CPU-vs-CUDA parity of the pools (cuda/pool2d.cu): max pool with overlapping windows,
// padding, a NaN, and both argmax encodings (u8 window position; i32 plane index for windows
// over 256 cells); avg pool with padding; adaptive pools that shrink (overlapping windows)
// and grow; forward and backward, f32 and f64. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

void expect_parity(const std::function<Tensor(const Tensor&)>& op, const Tensor& x, const std::string& what) {
  Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
  const Tensor yc = op(xc), yg = op(xg);
  EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
  const Tensor g = testing::randn(yc.shape(), 7, x.dtype());
  yc.backward(g);
  yg.backward(g.to(kCuda));
  EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " dx";
}

TEST(CudaPool2d, MaxAvgAndAdaptiveMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    const std::string d = dtype_name(dt);
    Tensor x = testing::randn({2, 3, 11, 9}, 31, dt);
    expect_parity([](const Tensor& t) { return max_pool2d(t, {{3, 3}, {2, 2}, {1, 1}}); }, x, d + " max 3x3/2 pad 1");
    expect_parity([](const Tensor& t) { return max_pool2d(t, {{2, 3}, {1, 2}, {0, 1}}); }, x, d + " max 2x3");
    expect_parity([](const Tensor& t) { return max_pool2d(t, {{17, 17}, {1, 1}, {8, 8}}); },
                  testing::randn({1, 2, 18, 20}, 32, dt), d + " max 17x17 (i32 argmax)");
    expect_parity([](const Tensor& t) { return avg_pool2d(t, {{3, 3}, {2, 2}, {1, 1}}); }, x, d + " avg 3x3/2 pad 1");
    expect_parity([](const Tensor& t) { return avg_pool2d(t, {{2, 2}, {2, 2}, {0, 0}}); }, x, d + " avg 2x2");
    expect_parity([](const Tensor& t) { return adaptive_avg_pool2d(t, 4, 3); }, x, d + " adaptive 4x3");
    expect_parity([](const Tensor& t) { return adaptive_avg_pool2d(t, 1, 1); }, x, d + " adaptive 1x1");
    expect_parity([](const Tensor& t) { return adaptive_avg_pool2d(t, 5, 7); },
                  testing::randn({1, 2, 2, 3}, 33, dt), d + " adaptive growing 2x3 -> 5x7");
  }
  // A NaN wins its windows on both devices.
  Tensor x = testing::randn({1, 1, 6, 6}, 34, DType::F32);
  x.data<float>()[14] = NAN;
  const Tensor yc = max_pool2d(x, {{3, 3}, {2, 2}, {1, 1}});
  const Tensor yg = max_pool2d(x.to(kCuda), {{3, 3}, {2, 2}, {1, 1}}).to(Device::cpu());
  for (int64_t i = 0; i < yc.numel(); ++i)
    EXPECT_EQ(std::isnan(yc.data<float>()[i]), std::isnan(yg.data<float>()[i])) << "output " << i;
}

}  // namespace
}  // namespace lb
