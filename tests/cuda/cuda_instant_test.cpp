// CPU-vs-CUDA parity of INSTANT on Linear layers (src/backend/lowrank.h; cuda/lowrank.cpp):
// the low-rank kernel table on the device against the CPU's, and the whole strategy —
// calibration (Gram statistics and syevd on the device), the saved projection, and g_x, g_w,
// g_b — on padded and padding-free batches, both axes. Eigenvectors are defined up to sign,
// and every product uses P or Q twice (PᵀP, QᵀQ), so the gradients are compared, not the
// bases. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <vector>

#include "lb/core/cuda_runtime_info.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/instant.h"
#include "lb/ops.h"
#include "src/backend/lowrank.h"
#include "testing/strategies.h"
#include "testing/testing.h"

namespace lb::nn::backward {
namespace {

const Device kCuda = Device::cuda(0);

std::shared_ptr<Instant> instant(const nlohmann::json& spec) { return testing::make_instant(spec); }

struct Grads {
  Tensor gx, gw, gb;
};

Grads run_linear(const std::shared_ptr<Strategy>& s, const Tensor& x, const Tensor& w, const Tensor& b,
                 const Tensor& g, Device d, const CallContext& call = {}) {
  Tensor xi = x.to(d), wi = w.to(d), bi = b.to(d);
  xi.set_requires_grad();
  wi.set_requires_grad();
  bi.set_requires_grad();
  Tensor y = strategy_linear(xi, wi, bi, s, call);
  y.backward(g.to(d));
  return {xi.grad().to(Device::cpu()), wi.grad().to(Device::cpu()), bi.grad().to(Device::cpu())};
}

TEST(CudaInstant, KernelTableMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const auto& gpu = backend::lowrank_kernels(kCuda);
  const std::vector<int64_t> offsets = {0, 5, 5, 18, 19, 28};
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-12;
    for (bool pack : {false, true}) {
      const std::string what = std::string(dtype_name(dt)) + (pack ? " packed" : " padded");
      const Tensor x = (pack ? testing::randn({1, 28, 33}, 1) : testing::randn({4, 10, 33}, 1)).to(dt);
      const std::vector<int64_t>* seq = pack ? &offsets : nullptr;
      const int64_t S = pack ? 5 : 4, Lp = pack ? 16 : 10, R = 6;
      const Tensor a = testing::randn({R, Lp}, 2).to(dt);
      Tensor want = Tensor::empty({R, S, 33}, dt), want_bias = Tensor::empty({33}, dt);
      backend::kCpuLowrank.project(a, x, seq, want, want_bias);
      Tensor got = Tensor::empty({R, S, 33}, dt, kCuda), got_bias = Tensor::empty({33}, dt, kCuda);
      gpu.project(a.to(kCuda), x.to(kCuda), seq, got, got_bias);
      EXPECT_LT(testing::rel_error(got.to(Device::cpu()), want), tol) << what << " projection";
      EXPECT_LT(testing::rel_error(got_bias.to(Device::cpu()), want_bias), tol) << what << " bias";
      const Tensor in = testing::randn({R, S, 33}, 3).to(dt);
      Tensor want_x = Tensor::zeros(x.shape(), dt), got_x = Tensor::full(x.shape(), 7.0, dt, kCuda);
      backend::kCpuLowrank.expand(a, in, seq, want_x);
      gpu.expand(a.to(kCuda), in.to(kCuda), seq, got_x);
      EXPECT_LT(testing::rel_error(got_x.to(Device::cpu()), want_x), tol) << what << " expansion";
      for (bool token : {true, false}) {
        const int64_t n = token ? Lp : 33;
        Tensor want_g = Tensor::zeros({n, n}, dt), got_g = Tensor::zeros({n, n}, dt, kCuda);
        backend::kCpuLowrank.gram_add(want_g, x, seq, token, 0.5);
        gpu.gram_add(got_g, x.to(kCuda), seq, token, 0.5);
        backend::kCpuLowrank.gram_finish(want_g, 2);
        gpu.gram_finish(got_g, 2);
        EXPECT_LT(testing::rel_error(got_g.to(Device::cpu()), want_g), tol) << what << (token ? " token" : " channel")
                                                                            << " Gram";
      }
    }
  }
}

TEST(CudaInstant, StrategyMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const int64_t B = 4, L = 12, I = 40, O = 36;
  const Tensor w = testing::randn({O, I}, 1).to(DType::F32), b = testing::randn({O}, 2).to(DType::F32);
  for (const char* gram : {"f64", "f32"})
    for (const char* axis : {"token", "channel"}) {
      const std::string what = std::string(axis) + " axis, gram " + gram;
      // TF32 is off by default, so f32 GEMMs are IEEE on both sides; the f32 Gram's eigenvectors
      // differ by rounding, hence the looser tolerance there.
      const double tol = std::string(gram) == "f64" ? 1e-4 : 2e-3;
      const nlohmann::json spec = {{"axis", axis}, {"rank", 5}, {"gram_dtype", gram}, {"exact_when_no_gain", false}};
      auto cpu = instant(spec), gpu = instant(spec);
      for (auto [s, d] : {std::pair{cpu, Device::cpu()}, std::pair{gpu, kCuda}}) {
        s->begin_calibration();
        for (uint64_t i = 0; i < 2; ++i)
          run_linear(s, testing::randn({B, L, I}, 10 + i).to(DType::F32), w, b,
                     testing::randn({B, L, O}, 20 + i).to(DType::F32), d);
        s->finish_calibration();
      }
      ASSERT_EQ(gpu->x_basis().choice.rank, 5) << what;
      EXPECT_TRUE(gpu->x_basis().proj.device().is_cuda()) << what;
      const std::vector<double> ec = cpu->x_basis().eigenvalues, eg = gpu->x_basis().eigenvalues;
      ASSERT_EQ(ec.size(), eg.size());
      for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(eg[i], ec[i], 1e-3 * std::abs(ec[0])) << what << " eigenvalue " << i;
      const Tensor x = testing::randn({B, L, I}, 30).to(DType::F32), g = testing::randn({B, L, O}, 31).to(DType::F32);
      const Grads c = run_linear(cpu, x, w, b, g, Device::cpu()), k = run_linear(gpu, x, w, b, g, kCuda);
      EXPECT_LT(testing::rel_error(k.gw, c.gw), tol) << what << " g_w";
      EXPECT_LT(testing::rel_error(k.gx, c.gx), tol) << what << " g_x";
      EXPECT_LT(testing::rel_error(k.gb, c.gb), 1e-5) << what << " g_b";
      EXPECT_EQ(gpu->report()["measured"]["saved_bytes_last_call"], cpu->report()["measured"]["saved_bytes_last_call"])
          << what;
    }
}

TEST(CudaInstant, PackedSequencesMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  auto offsets = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{0, 5, 13, 16, 17});
  const int64_t N = 17, Lmax = 8, I = 37, O = 35;
  const Tensor w = testing::randn({O, I}, 1).to(DType::F32), b = testing::randn({O}, 2).to(DType::F32);
  const nlohmann::json spec = {{"axis", "token"}, {"rank", 3}, {"gram_dtype", "f64"}, {"exact_when_no_gain", false}};
  auto cpu = instant(spec), gpu = instant(spec);
  Grads got[2];
  int i = 0;
  for (auto [s, d] : {std::pair{cpu, Device::cpu()}, std::pair{gpu, kCuda}}) {
    s->calibration()->set_max_tokens(Lmax);
    const CallContext call{offsets, nullptr};
    s->begin_calibration();
    run_linear(s, testing::randn({1, N, I}, 10).to(DType::F32), w, b, testing::randn({1, N, O}, 20).to(DType::F32), d,
               call);
    s->finish_calibration();
    got[i++] = run_linear(s, testing::randn({1, N, I}, 30).to(DType::F32), w, b,
                          testing::randn({1, N, O}, 31).to(DType::F32), d, call);
  }
  EXPECT_LT(testing::rel_error(got[1].gw, got[0].gw), 1e-4) << "g_w";
  EXPECT_LT(testing::rel_error(got[1].gx, got[0].gx), 1e-4) << "g_x";
  EXPECT_LT(testing::rel_error(got[1].gb, got[0].gb), 1e-5) << "g_b";
}

// A Conv2d through INSTANT on CUDA (the token view) against the CPU's image-layout path.
TEST(CudaInstant, ConvMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  Conv2dArgs a;
  a.padding = {1, 1};
  const Tensor w = testing::randn({6, 4, 3, 3}, 1).to(DType::F32), b = testing::randn({6}, 2).to(DType::F32);
  std::vector<Tensor> got[2];
  for (int side = 0; side < 2; ++side) {
    const Device d = side == 0 ? Device::cpu() : kCuda;
    auto s = instant({{"rank", 3}, {"gram_dtype", "f64"}, {"exact_when_no_gain", false}});
    auto run = [&](const Tensor& x, const Tensor& g) {
      Tensor xi = x.to(DType::F32).to(d), wi = w.to(d), bi = b.to(d);
      xi.set_requires_grad();
      wi.set_requires_grad();
      bi.set_requires_grad();
      strategy_conv2d(xi, wi, bi, a, s).backward(g.to(DType::F32).to(d));
      return std::vector<Tensor>{xi.grad().to(Device::cpu()), wi.grad().to(Device::cpu()), bi.grad().to(Device::cpu())};
    };
    s->begin_calibration();
    for (uint64_t i = 0; i < 2; ++i) run(testing::randn({3, 4, 6, 6}, 10 + i), testing::randn({3, 6, 6, 6}, 20 + i));
    s->finish_calibration();
    got[side] = run(testing::randn({3, 4, 6, 6}, 30), testing::randn({3, 6, 6, 6}, 31));
  }
  for (int i = 0; i < 3; ++i) EXPECT_LT(testing::rel_error(got[1][i], got[0][i]), 1e-4) << "grad " << i;
}

}  // namespace
}  // namespace lb::nn::backward
