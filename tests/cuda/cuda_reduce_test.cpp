// CPU-vs-CUDA parity of the reductions (sum / mean over axis sets, max / argmax along an
// axis, sum_to) forward and backward, and of elementwise backward through broadcasting,
// which sums gradients back to the input shapes. f32 at atol 1e-5 / rtol 1e-4 (summation
// orders differ), f64 at 1e-12. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

void expect_close(const Tensor& gpu, const Tensor& cpu, DType dt, const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  const double atol = dt == DType::F32 ? 1e-5 : 1e-12, rtol = dt == DType::F32 ? 1e-4 : 1e-12;
  const std::vector<double> g = gpu.to(Device::cpu()).to_double_vector(), c = cpu.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], c[i], atol + rtol * std::abs(c[i])) << what << " [" << i << "]";
}

class CudaReduce : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  }
};

TEST_F(CudaReduce, SumsAndMeansOverAxisSetsMatchTheCpu) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor x = testing::randn({4, 5, 6}, 51, dt);
    for (const std::vector<int64_t>& dims :
         std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {-1}}) {
      for (bool keepdim : {false, true}) {
        const std::string what = std::string(dtype_name(dt)) + " dims " + std::to_string(dims.size()) +
                                 (dims.empty() ? "" : " first " + std::to_string(dims[0])) + (keepdim ? " keep" : "");
        Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
        const Tensor yc = sum(xc, dims, keepdim), yg = sum(xg, dims, keepdim);
        expect_close(yg, yc, dt, "sum " + what);
        expect_close(mean(xg, dims, keepdim), mean(xc, dims, keepdim), dt, "mean " + what);
        const Tensor r = testing::randn(yc.shape(), 52, dt);
        yc.backward(r);
        yg.backward(r.to(kCuda));
        expect_close(xg.grad(), xc.grad(), dt, "sum backward " + what);
      }
    }
    // A strided (transposed) input, no copy on the device.
    expect_close(sum(x.to(kCuda).transpose(0, 2), {1}), sum(x.transpose(0, 2), {1}), dt, "transposed");
  }
}

TEST_F(CudaReduce, MaxAndArgmaxMatchTheCpu) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor x = testing::randn({3, 7, 4}, 61, dt);
    for (int64_t dim : {0, 1, 2}) {
      Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
      const Tensor yc = max(xc, dim), yg = max(xg, dim);
      expect_close(yg, yc, dt, "max dim " + std::to_string(dim));
      EXPECT_EQ(argmax(x.to(kCuda), dim).to(Device::cpu()).to_double_vector(), argmax(x, dim).to_double_vector());
      const Tensor r = testing::randn(yc.shape(), 62, dt);
      yc.backward(r);
      yg.backward(r.to(kCuda));
      expect_close(xg.grad(), xc.grad(), dt, "max backward dim " + std::to_string(dim));
    }
  }
}

TEST_F(CudaReduce, BroadcastGradientsSumBackLikeTheCpu) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor a = testing::randn({4, 1, 6}, 71, dt), b = testing::randn({5, 1}, 72, dt);
    Tensor ac = a.clone().set_requires_grad(), bc = b.clone().set_requires_grad();
    Tensor ag = a.to(kCuda).set_requires_grad(), bg = b.to(kCuda).set_requires_grad();
    const Tensor yc = mul(add(ac, bc), bc), yg = mul(add(ag, bg), bg);  // (4, 5, 6)
    expect_close(yg, yc, dt, "forward");
    const Tensor r = testing::randn(yc.shape(), 73, dt);
    yc.backward(r);
    yg.backward(r.to(kCuda));
    expect_close(ag.grad(), ac.grad(), dt, "grad a");
    expect_close(bg.grad(), bc.grad(), dt, "grad b");
    expect_close(sum_to(yg.detach(), {5, 1}), sum_to(yc.detach(), {5, 1}), dt, "sum_to");
  }
}

}  // namespace
}  // namespace lb
