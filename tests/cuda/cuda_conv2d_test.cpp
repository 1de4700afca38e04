// CPU-vs-CUDA parity of conv2d (cuda/conv2d.cu: im2col + batched cuBLAS GEMM; the CPU runs
// im2col + GEMM or Winograd): stride, padding, dilation, groups, 1×1, with and without
// bias; y and every gradient, f32 and f64; conv2d_grads with only some gradients wanted.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

struct Case {
  Shape x, w;
  Conv2dArgs args;
  bool bias;
};

TEST(CudaConv2d, ForwardAndGradientsMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const std::vector<Case> cases = {
      {{2, 3, 9, 8}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true},    // 3×3 same (Winograd on the CPU when wide)
      {{2, 16, 10, 10}, {16, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, false},
      {{3, 4, 11, 7}, {6, 4, 3, 2}, {{2, 1}, {1, 0}, {1, 1}, 1}, true},   // strided, uneven padding
      {{1, 6, 12, 12}, {4, 3, 3, 3}, {{1, 2}, {2, 1}, {2, 1}, 2}, true},  // dilation, groups
      {{2, 8, 5, 5}, {5, 8, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, true},    // 1×1
      {{2, 4, 7, 7}, {8, 1, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 4}, false},   // depthwise-like
  };
  for (DType dt : {DType::F32, DType::F64}) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const std::string what = std::string(dtype_name(dt)) + " case " + std::to_string(k);
      const Tensor x = testing::randn(c.x, 71 + k, dt), w = testing::randn(c.w, 72 + k, dt);
      const Tensor b = c.bias ? testing::randn({c.w[0]}, 73 + k, dt) : Tensor();
      Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
      Tensor wc = w.clone().set_requires_grad(), wg = w.to(kCuda).set_requires_grad();
      Tensor bc, bg;
      if (c.bias) {
        bc = b.clone().set_requires_grad();
        bg = b.to(kCuda).set_requires_grad();
      }
      const Tensor yc = conv2d(xc, wc, bc, c.args), yg = conv2d(xg, wg, bg, c.args);
      EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
      const Tensor g = testing::randn(yc.shape(), 74 + k, dt);
      yc.backward(g);
      yg.backward(g.to(kCuda));
      EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " dx";
      EXPECT_TRUE(testing::device_matches_cpu(wg.grad(), wc.grad())) << what << " dw";
      if (c.bias) EXPECT_TRUE(testing::device_matches_cpu(bg.grad(), bc.grad())) << what << " db";
      // Only the filter gradient (the path a compressed backward's g_w check takes), then only dx.
      const Conv2dGrads gw = conv2d_grads(g.to(kCuda), x.to(kCuda), w.to(kCuda), c.args, false, true, false);
      EXPECT_FALSE(gw.grad_input.defined()) << what;
      EXPECT_TRUE(testing::device_matches_cpu(gw.grad_weight, wc.grad())) << what << " conv2d_grads dw";
      const Conv2dGrads gx = conv2d_grads(g.to(kCuda), x.to(kCuda), w.to(kCuda), c.args, true, false, false);
      EXPECT_TRUE(testing::device_matches_cpu(gx.grad_input, xc.grad())) << what << " conv2d_grads dx";
    }
  }
}

}  // namespace
}  // namespace lb
