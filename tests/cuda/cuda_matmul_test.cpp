// CPU-vs-CUDA parity of matmul and linear (cuBLAS, cuda/gemm.cu; bias kernels cuda/bias.cu)
// forward and backward, over the layouts
// the GEMM treats differently: plain and transposed operands (flags and transposed views), an
// operand strided both ways (copied), a batch folded into M (shared b), the weight-gradient
// fold into K, strided-batched products, a batch that is no single stride (a loop), and
// gradients summed over broadcast batch dims. Also the bf16-operand products with an f32
// result that bf16 training uses. f32 at atol 1e-5 / rtol 1e-4 with TF32 off (summation
// orders differ), f64 at 1e-12. Skips without a CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/core/precision.h"
#include "lb/ops.h"
#include "src/backend/gemm.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

class CudaMatmul : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  }
};

TEST_F(CudaMatmul, ForwardAndBackwardMatchTheCpuOnEveryLayout) {
  struct Case {
    const char* what;
    Shape a, b;
    bool ta, tb;
  };
  const std::vector<Case> cases = {
      {"2d", {5, 7}, {7, 3}, false, false},
      {"trans a", {7, 5}, {7, 3}, true, false},
      {"trans b", {5, 7}, {3, 7}, false, true},
      {"batched (strided batched)", {4, 5, 7}, {4, 7, 3}, false, false},
      {"shared b (fold into M; g_w folds into K)", {4, 5, 7}, {7, 3}, false, false},
      {"shared a", {5, 7}, {4, 7, 3}, false, false},
      {"batched, both transposed", {4, 7, 5}, {4, 3, 7}, true, true},
      {"broadcast batch (a loop)", {2, 1, 5, 7}, {3, 7, 4}, false, false},
  };
  for (DType dt : {DType::F32, DType::F64}) {
    for (const Case& c : cases) {
      const std::string what = std::string(c.what) + " " + dtype_name(dt);
      const Tensor a = testing::randn(c.a, 11, dt), b = testing::randn(c.b, 12, dt);
      Tensor ac = a.clone().set_requires_grad(), bc = b.clone().set_requires_grad();
      Tensor ag = a.to(kCuda).set_requires_grad(), bg = b.to(kCuda).set_requires_grad();
      const Tensor yc = matmul(ac, bc, c.ta, c.tb), yg = matmul(ag, bg, c.ta, c.tb);
      EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
      const Tensor g = testing::randn(yc.shape(), 13, dt);
      yc.backward(g);
      yg.backward(g.to(kCuda));
      EXPECT_TRUE(testing::device_matches_cpu(ag.grad(), ac.grad())) << what << " d a";
      EXPECT_TRUE(testing::device_matches_cpu(bg.grad(), bc.grad())) << what << " d b";
    }
    // Views: a transposed view (read as stored, flag flipped) and one strided both ways
    // (every other column: copied once on the device).
    const Tensor x = testing::randn({6, 8}, 21, dt), w = testing::randn({6, 4}, 22, dt);
    EXPECT_TRUE(testing::device_matches_cpu(matmul(x.to(kCuda).transpose(0, 1), w.to(kCuda)), matmul(x.transpose(0, 1), w))) << "view";
    const Tensor xs = testing::randn({5, 12}, 23, dt);
    const Tensor sc = xs.slice(1, 0, 12, 2), sg = xs.to(kCuda).slice(1, 0, 12, 2);  // (5, 6), column stride 2
    const Tensor v = testing::randn({6, 3}, 24, dt);
    EXPECT_TRUE(testing::device_matches_cpu(matmul(sg, v.to(kCuda)), matmul(sc, v))) << "strided both ways";
  }
}

TEST_F(CudaMatmul, LinearWithAndWithoutBiasMatchesTheCpu) {
  // x of 3, 2 and 1 dims (rows folded into the GEMM; one row), with and without a bias.
  for (DType dt : {DType::F32, DType::F64}) {
    for (const Shape& xs : std::vector<Shape>{{2, 5, 7}, {6, 7}, {7}}) {
      for (bool bias : {true, false}) {
        const std::string what = std::string(dtype_name(dt)) + " x dims " + std::to_string(xs.size()) +
                                 (bias ? " bias" : " no bias");
        const Tensor x = testing::randn(xs, 41, dt), w = testing::randn({4, 7}, 42, dt), b = testing::randn({4}, 43, dt);
        Tensor xc = x.clone().set_requires_grad(), wc = w.clone().set_requires_grad(), bc = b.clone().set_requires_grad();
        Tensor xg = x.to(kCuda).set_requires_grad(), wg = w.to(kCuda).set_requires_grad(),
               bg = b.to(kCuda).set_requires_grad();
        const Tensor yc = linear(xc, wc, bias ? bc : Tensor()), yg = linear(xg, wg, bias ? bg : Tensor());
        EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
        const Tensor g = testing::randn(yc.shape(), 44, dt);
        yc.backward(g);
        yg.backward(g.to(kCuda));
        EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " d x";
        EXPECT_TRUE(testing::device_matches_cpu(wg.grad(), wc.grad())) << what << " d w";
        if (bias) EXPECT_TRUE(testing::device_matches_cpu(bg.grad(), bc.grad())) << what << " d b";
      }
    }
  }
}

TEST_F(CudaMatmul, Bf16OperandsWithAnF32ResultMatchTheCpu) {
  // As bf16 training keeps them: bf16 x bf16 -> f32, and one bf16 operand (widened first).
  const Tensor a = testing::randn({3, 16, 24}, 31, DType::F32).to(DType::BF16);
  const Tensor b = testing::randn({24, 8}, 32, DType::F32).to(DType::BF16);
  const Tensor bf = testing::randn({24, 8}, 33, DType::F32);
  const Shape batch = {3};
  for (bool both : {true, false}) {
    const Tensor& rhs = both ? b : bf;
    Tensor cc = Tensor::empty({3, 16, 8}, DType::F32), cg = Tensor::empty({3, 16, 8}, DType::F32, kCuda);
    backend::gemm_kernels(Device::cpu()).gemm_into(cc, a, false, rhs, false, batch, false);
    backend::gemm_kernels(kCuda).gemm_into(cg, a.to(kCuda), false, rhs.to(kCuda), false, batch, false);
    EXPECT_TRUE(testing::device_matches_cpu(cg, cc)) << (both ? "both bf16" : "a bf16");
    // accumulate: c += the same product
    backend::gemm_kernels(Device::cpu()).gemm_into(cc, a, false, rhs, false, batch, true);
    backend::gemm_kernels(kCuda).gemm_into(cg, a.to(kCuda), false, rhs.to(kCuda), false, batch, true);
    EXPECT_TRUE(testing::device_matches_cpu(cg, cc)) << (both ? "both bf16" : "a bf16") << " accumulated";
  }
}

// precision bf16 on f32 operands: the CPU rounds them to bf16 (round to nearest even) and
// accumulates in f32; cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF does the same on tensor cores.
// The products of bf16 values are exact in f32, so only the summation order differs: held
// to 1e-4 relative (L2), against ~4e-3 for the f32 product, which this must not equal.
TEST_F(CudaMatmul, PrecisionBf16RoundsF32OperandsAsTheCpu) {
  const Tensor a = testing::randn({64, 96}, 34, DType::F32), b = testing::randn({96, 48}, 35, DType::F32);
  const Tensor exact = matmul(a, b);
  MatmulPrecisionScope bf16(MatmulPrecision::BF16);
  const Tensor cc = matmul(a, b), cg = matmul(a.to(kCuda), b.to(kCuda)).to(Device::cpu());
  EXPECT_LT(testing::rel_error(cg, cc), 1e-4);
  EXPECT_GT(testing::rel_error(cg, exact), 1e-4) << "the CUDA product was not rounded to bf16";
}

// precision tf32 (opt-in): 10-bit mantissas on CUDA (about 1e-3 relative from the f32
// product), none on the CPU (its product stays f32's).
TEST_F(CudaMatmul, PrecisionTf32IsOptInAndCudaOnly) {
  const Tensor a = testing::randn({64, 96}, 36, DType::F32), b = testing::randn({96, 48}, 37, DType::F32);
  const Tensor exact = matmul(a, b);
  MatmulPrecisionScope tf32(MatmulPrecision::TF32);
  EXPECT_EQ(testing::rel_error(matmul(a, b), exact), 0.0) << "the CPU has no TF32";
  const double err = testing::rel_error(matmul(a.to(kCuda), b.to(kCuda)).to(Device::cpu()), exact);
  EXPECT_GT(err, 1e-6) << "the CUDA product was not on the TF32 path";
  EXPECT_LT(err, 1e-2);
}

}  // namespace
}  // namespace lb
