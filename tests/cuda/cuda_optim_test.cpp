// CPU-vs-CUDA parity of the optimizer updates (SGD with Nesterov momentum and weight decay,
// Adam, AdamW) over five steps with fresh gradients each step, and of global-norm gradient
// clipping. f32 at atol 1e-6 / rtol 1e-5, f64 at 1e-12. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "lb/core/cuda_runtime_info.h"
#include "lb/optim/optimizer.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

void expect_close(const Tensor& gpu, const Tensor& cpu, DType dt, const std::string& what) {
  const double atol = dt == DType::F32 ? 1e-6 : 1e-12, rtol = dt == DType::F32 ? 1e-5 : 1e-12;
  const std::vector<double> g = gpu.to(Device::cpu()).to_double_vector(), c = cpu.to_double_vector();
  ASSERT_EQ(g.size(), c.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], c[i], atol + rtol * std::abs(c[i])) << what << " [" << i << "]";
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup>)>;

void check_optimizer(const std::string& name, const MakeOpt& make) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor w0 = testing::randn({33, 17}, 81, dt);
    Tensor wc = w0.clone().set_requires_grad(), wg = w0.to(kCuda).set_requires_grad();
    auto oc = make({optim::ParamGroup{{{"w", wc}}, 0.05, 0.01}});
    auto og = make({optim::ParamGroup{{{"w", wg}}, 0.05, 0.01}});
    for (int step = 0; step < 5; ++step) {
      const Tensor g = testing::randn(w0.shape(), 90 + static_cast<uint64_t>(step), dt);
      wc.set_grad(g.clone());
      wg.set_grad(g.to(kCuda));
      oc->step();
      og->step();
      expect_close(wg, wc, dt, name + " " + dtype_name(dt) + " step " + std::to_string(step));
    }
  }
}

class CudaOptim : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  }
};

TEST_F(CudaOptim, UpdatesMatchTheCpu) {
  check_optimizer("sgd nesterov", [](std::vector<optim::ParamGroup> g) {
    return std::make_unique<optim::SGD>(std::move(g), optim::SgdOptions{0.9, 0.0, true});
  });
  check_optimizer("adamw", [](std::vector<optim::ParamGroup> g) {
    return std::make_unique<optim::Adam>(std::move(g), optim::AdamOptions{});
  });
  check_optimizer("adam", [](std::vector<optim::ParamGroup> g) {
    optim::AdamOptions o;
    o.decoupled = false;
    return std::make_unique<optim::Adam>(std::move(g), o);
  });
}

TEST_F(CudaOptim, GradientClippingMatchesTheCpu) {
  const Tensor a = testing::randn({1000, 37}, 95, DType::F32), b = testing::randn({13}, 96, DType::F32);
  Tensor ac = Tensor::zeros(a.shape()).set_requires_grad(), bc = Tensor::zeros(b.shape()).set_requires_grad();
  Tensor ag = ac.detach().to(kCuda).set_requires_grad(), bg = bc.detach().to(kCuda).set_requires_grad();
  ac.set_grad(a.clone());
  bc.set_grad(b.clone());
  ag.set_grad(a.to(kCuda));
  bg.set_grad(b.to(kCuda));
  const double nc = optim::clip_grad_norm({ac, bc}, 1.0), ng = optim::clip_grad_norm({ag, bg}, 1.0);
  EXPECT_NEAR(ng, nc, 1e-9 * nc);
  expect_close(ag.grad(), ac.grad(), DType::F32, "clipped a");
  expect_close(bg.grad(), bc.grad(), DType::F32, "clipped b");
}

}  // namespace
}  // namespace lb
