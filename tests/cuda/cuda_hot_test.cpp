// CPU-vs-CUDA parity of HOT on Linear layers (cuda/quantize.cu, cuda/int8_gemm.cu): every
// quantisation kernel gives the CPU's int8 levels bit for bit (round-to-nearest and
// stochastic rounding, which draws the same Philox values on both), the same maxima and
// scales, and its sums to the CPU vector kernels' f32 partial-sum rounding; the int8 GEMM gives the CPU's f32 values exactly
// (exact int32 sums, the same rounded epilogue); and the strategy — LQS, the saved int8 X̂,
// g_x and g_w — matches the CPU exactly. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lb/core/cuda_runtime_info.h"
#include "lb/core/philox.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/hot.h"
#include "lb/ops.h"
#include "lb/core/quantize_formulas.h"
#include "src/backend/conv_tokens.h"
#include "src/backend/int8_gemm.h"
#include "src/backend/quantize.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

std::vector<double> host(const Tensor& t) { return t.to(Device::cpu()).to_double_vector(); }

backend::HadamardKeep keep_rows(int r) {
  backend::HadamardKeep k;
  k.r = r;
  for (int j = 0; j < r; ++j) k.idx[j] = (j * 5) % 16;  // any distinct rows, not in order
  return k;
}

backend::QuantParams params(int bits, bool stochastic) {
  backend::QuantParams p;
  p.qmax = quant::qmax_for_bits(bits);
  p.stochastic = stochastic;
  p.key = quant::philox_key(1234, 7, 3, 1, 2);
  return p;
}

TEST(CudaHot, QuantizationKernelsMatchTheCpuBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const backend::QuantizeKernels& cpu_k = backend::kCpuQuantize;
  const backend::QuantizeKernels& gpu_k = backend::quantize_kernels(kCuda);
  struct Size {
    int64_t rows, cols;
  };
  for (const Size& sz : {Size{37, 50}, Size{64, 48}, Size{1, 3}}) {
    const std::string what = std::to_string(sz.rows) + "x" + std::to_string(sz.cols);
    const int64_t c16 = backend::round_up16(sz.cols);
    const Tensor x = testing::randn({sz.rows, sz.cols}, 5).to(DType::F32), xd = x.to(kCuda);
    EXPECT_EQ(gpu_k.rows_absmax(xd), cpu_k.rows_absmax(x)) << what;
    Tensor yc = Tensor::empty({sz.rows, c16}), yg = Tensor::empty({sz.rows, c16}, DType::F32, kCuda);
    cpu_k.rows(x, yc);
    gpu_k.rows(xd, yg);
    EXPECT_EQ(host(yg), host(yc)) << what << " rows transform";
    for (int bits : {4, 8})
      for (bool sr : {false, true}) {
        const std::string how = what + " " + std::to_string(bits) + "-bit" + (sr ? " SR" : " RTN");
        const backend::QuantParams p = params(bits, sr);
        Tensor qc = Tensor::empty({sz.rows, c16}, DType::I8), qg = Tensor::empty({sz.rows, c16}, DType::I8, kCuda);
        cpu_k.rows_quantize(x, 0.37f, p, qc);
        gpu_k.rows_quantize(xd, 0.37f, p, qg);
        EXPECT_EQ(host(qg), host(qc)) << how << " rows";
        Tensor sc = Tensor::empty({sz.rows}), sg = Tensor::empty({sz.rows}, DType::F32, kCuda);
        cpu_k.rows_quantize_per_row(x, p, qc, sc);
        gpu_k.rows_quantize_per_row(xd, p, qg, sg);
        EXPECT_EQ(host(qg), host(qc)) << how << " per-row levels";
        EXPECT_EQ(host(sg), host(sc)) << how << " per-row scales";
        EXPECT_NEAR(gpu_k.dequantized_l2_error(qg, sg, 0.f, yg), cpu_k.dequantized_l2_error(qc, sc, 0.f, yc),
                    1e-9 * cpu_k.dequantized_l2_error(qc, sc, 0.f, yc) + 1e-12)
            << how << " LQS error";
        for (int r : {16, 8, 3}) {
          const backend::HadamardKeep keep = keep_rows(r);
          const int64_t out_rows = backend::cols_out_rows(sz.rows, keep);
          const backend::TensorStats a = cpu_k.cols_stats(x, keep), b = gpu_k.cols_stats(xd, keep);
          EXPECT_EQ(b.absmax, a.absmax) << how << " keep " << r;
          EXPECT_EQ(b.count, a.count) << how << " keep " << r;
          EXPECT_NEAR(b.sum_sq, a.sum_sq, 1e-6 * a.sum_sq) << how << " keep " << r;
          EXPECT_NEAR(b.sum_abs, a.sum_abs, 1e-6 * a.sum_abs) << how << " keep " << r;
          Tensor cc = Tensor::empty({out_rows, sz.cols}, DType::I8), cg = Tensor::empty({out_rows, sz.cols}, DType::I8, kCuda);
          cpu_k.cols_quantize(x, keep, 0.59f, p, cc);
          gpu_k.cols_quantize(xd, keep, 0.59f, p, cg);
          EXPECT_EQ(host(cg), host(cc)) << how << " cols keep " << r;
          Tensor fc = Tensor::empty({out_rows, sz.cols}), fg = Tensor::empty({out_rows, sz.cols}, DType::F32, kCuda);
          cpu_k.cols(x, keep, fc);
          gpu_k.cols(xd, keep, fg);
          EXPECT_EQ(host(fg), host(fc)) << how << " cols transform keep " << r;
          for (bool per_row : {false, true}) {
            Tensor rc = Tensor::empty({sz.rows, c16}, DType::I8), rg = Tensor::empty({sz.rows, c16}, DType::I8, kCuda);
            Tensor sc2 = per_row ? Tensor::empty({sz.rows}) : Tensor();
            Tensor sg2 = per_row ? Tensor::empty({sz.rows}, DType::F32, kCuda) : Tensor();
            const backend::QuantParams pc = params(8, true);
            const backend::DualScales dc = cpu_k.dual_quantize(x, p, per_row, rc, sc2, keep, pc, cc);
            const backend::DualScales dg = gpu_k.dual_quantize(xd, p, per_row, rg, sg2, keep, pc, cg);
            EXPECT_EQ(dg.rows, dc.rows) << how << " dual";
            EXPECT_EQ(dg.cols, dc.cols) << how << " dual";
            EXPECT_EQ(host(rg), host(rc)) << how << " dual rows";
            EXPECT_EQ(host(cg), host(cc)) << how << " dual cols";
            if (per_row) EXPECT_EQ(host(sg2), host(sc2)) << how << " dual row scales";
          }
        }
      }
  }
}

Tensor random_levels(const Shape& shape, uint64_t seed) {
  std::vector<int8_t> v(static_cast<size_t>(shape_numel(shape)));
  PhiloxStream rng(seed);
  for (auto& e : v) e = static_cast<int8_t>(static_cast<int>(rng.next_u32() % 255) - 127);
  return Tensor::from_vector(v, shape);
}

TEST(CudaHot, RawInputQuantisationMatchesTheCpuBitForBit) {
  // The untransformed kernels of HOT's raw conv input: absmax, quantise (draw i for element i),
  // dequantise.
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const backend::QuantizeKernels& cpu_k = backend::kCpuQuantize;
  const backend::QuantizeKernels& gpu_k = backend::quantize_kernels(kCuda);
  const Tensor x = testing::randn({3, 5, 7, 9}, 11).to(DType::F32), xd = x.to(kCuda);
  const float m = cpu_k.absmax(x);
  EXPECT_EQ(gpu_k.absmax(xd), m);
  for (bool sr : {false, true}) {
    const backend::QuantParams p = params(8, sr);
    Tensor qc = Tensor::empty(x.shape(), DType::I8), qg = Tensor::empty(x.shape(), DType::I8, kCuda);
    cpu_k.quantize(x, quant::inv_scale_from_absmax(m, p.qmax), p, qc);
    gpu_k.quantize(xd, quant::inv_scale_from_absmax(m, p.qmax), p, qg);
    EXPECT_EQ(host(qg), host(qc)) << "stochastic " << sr;
    Tensor yc = Tensor::empty(x.shape()), yg = Tensor::empty(x.shape(), DType::F32, kCuda);
    cpu_k.dequantize(qc, 0.37f, yc);
    gpu_k.dequantize(qc.to(kCuda), 0.37f, yg);
    EXPECT_EQ(host(yg), host(yc)) << "stochastic " << sr;
  }
}

TEST(CudaHot, Int8GemmMatchesTheCpuExactly) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const auto& gpu = backend::int8_gemm_kernels(kCuda);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t K : {int64_t{16}, int64_t{13}, int64_t{300}}) {
        const int64_t M = 37, N = 29;
        const std::string what = "ta " + std::to_string(ta) + " tb " + std::to_string(tb) + " K " + std::to_string(K);
        const Tensor A = random_levels(ta ? Shape{K, M} : Shape{M, K}, 1), B = random_levels(tb ? Shape{N, K} : Shape{K, N}, 2);
        const Tensor rs = testing::randn({M}, 3).to(DType::F32);
        for (bool with_rows : {false, true}) {
          Tensor oc = testing::randn({M, N}, 4).to(DType::F32), og = oc.to(kCuda);
          backend::kCpuInt8Gemm.gemm_f32(ta, tb, M, N, K, A, 0, ta ? M : K, B, 0, tb ? K : N, oc, N,
                                          with_rows ? rs : Tensor(), 0.0123f, true);
          gpu.gemm_f32(ta, tb, M, N, K, A.to(kCuda), 0, ta ? M : K, B.to(kCuda), 0, tb ? K : N, og, N,
                       with_rows ? rs.to(kCuda) : Tensor(), 0.0123f, true);
          EXPECT_EQ(host(og), host(oc)) << what << (with_rows ? " with row scales" : "");
        }
      }
}

TEST(CudaHot, LinearStrategyMatchesTheCpuExactly) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const int64_t B = 2, L = 24, I = 40, O = 36;
  const Tensor x = testing::randn({B, L, I}, 1).to(DType::F32), w = testing::randn({O, I}, 2).to(DType::F32);
  const Tensor b = testing::randn({O}, 3).to(DType::F32), g = testing::randn({B, L, O}, 4).to(DType::F32);
  for (int gx_bits : {4, 8}) {
    std::vector<double> gx[2], gw[2], gb[2];
    for (int side = 0; side < 2; ++side) {
      const Device d = side == 0 ? Device::cpu() : kCuda;
      auto s = nn::backward::make_strategy({{"type", "hot"}, {"gx_bits", gx_bits}}, "test");
      s->set_layer("layer", 5);
      s->record().step_context = std::make_shared<const nn::backward::StepContext>(nn::backward::StepContext{99, 3, 0});
      Tensor xi = x.to(d), wi = w.to(d), bi = b.to(d);
      xi.set_requires_grad();
      wi.set_requires_grad();
      bi.set_requires_grad();
      nn::backward::strategy_linear(xi, wi, bi, std::shared_ptr<nn::backward::Strategy>(std::move(s))).backward(g.to(d));
      gx[side] = host(xi.grad());
      gw[side] = host(wi.grad());
      gb[side] = host(bi.grad());
    }
    EXPECT_EQ(gx[1], gx[0]) << gx_bits << "-bit g_x";
    EXPECT_EQ(gw[1], gw[0]) << gx_bits << "-bit g_w";
    ASSERT_EQ(gb[1].size(), gb[0].size());
    for (size_t i = 0; i < gb[0].size(); ++i) EXPECT_NEAR(gb[1][i], gb[0][i], 1e-4) << "g_b " << i;
  }
}

// A Conv2d through HOT on CUDA (the token view) against the CPU taking the same route.
TEST(CudaHot, ConvTokenViewMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  Conv2dArgs a;
  a.padding = {1, 1};
  const Tensor x = testing::randn({3, 4, 8, 8}, 3).to(DType::F32), w = testing::randn({6, 4, 3, 3}, 4).to(DType::F32);
  const Tensor b = testing::randn({6}, 5).to(DType::F32), g = testing::randn({3, 6, 8, 8}, 6).to(DType::F32);
  std::vector<double> gx[2], gw[2];
  for (int side = 0; side < 2; ++side) {
    const Device d = side == 0 ? Device::cpu() : kCuda;
    nn::backward::set_conv_token_view_on_cpu(side == 0);
    backend::set_generic_conv_tokens_on_cpu(side == 0);
    std::shared_ptr<nn::backward::Strategy> s = nn::backward::make_strategy({{"type", "hot"}, {"lqs", false}}, "test");
    s->record().step_context = std::make_shared<const nn::backward::StepContext>(nn::backward::StepContext{7, 1, 0});
    Tensor xi = x.to(d), wi = w.to(d), bi = b.to(d);
    xi.set_requires_grad();
    wi.set_requires_grad();
    bi.set_requires_grad();
    nn::backward::strategy_conv2d(xi, wi, bi, a, s).backward(g.to(d));
    gx[side] = host(xi.grad());
    gw[side] = host(wi.grad());
  }
  nn::backward::set_conv_token_view_on_cpu(false);
  backend::set_generic_conv_tokens_on_cpu(false);
  EXPECT_EQ(gw[1], gw[0]) << "g_w";
  ASSERT_EQ(gx[1].size(), gx[0].size());
  for (size_t i = 0; i < gx[0].size(); ++i)  // col2im's scatter-add order differs (atomics)
    EXPECT_NEAR(gx[1][i], gx[0][i], 1e-5 * (1 + std::abs(gx[0][i]))) << "g_x " << i;
}

}  // namespace
}  // namespace lb
