// CPU-vs-CUDA parity of fused attention (cuda/attention.cu): q, k, v as strided slices of
// one fused projection, a key-padding mask with a fully masked batch element, a per-head
// mask that requires grad, dropout drawing the CPU's Philox values (same outputs, same
// stream advance), cross attention (Tq ≠ Tk); out and dq, dk, dv, dmask, f32 and f64.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

struct Case {
  int64_t B, Tq, Tk, heads, d;
  bool key_padding, head_mask;
  double p;
};

TEST(CudaAttention, ForwardAndGradientsMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const std::vector<Case> cases = {
      {2, 7, 7, 3, 4, false, false, 0.0},
      {3, 9, 9, 2, 8, true, false, 0.0},
      {2, 5, 11, 4, 4, false, true, 0.0},
      {2, 13, 13, 2, 8, true, false, 0.2},
  };
  for (DType dt : {DType::F32, DType::F64}) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case& k = cases[c];
      const std::string what = std::string(dtype_name(dt)) + " case " + std::to_string(c);
      const int64_t H = k.heads * k.d;
      // q from its own tensor, k and v as slices of one fused (B, Tk, 2H) projection.
      const Tensor q0 = testing::randn({k.B, k.Tq, H}, 91 + c, dt);
      const Tensor kv0 = testing::randn({k.B, k.Tk, 2 * H}, 92 + c, dt);
      Tensor mask0;
      if (k.key_padding) {
        std::vector<double> m(static_cast<size_t>(k.B * k.Tk), 0.0);
        for (int64_t j = k.Tk - 3; j < k.Tk; ++j) m[static_cast<size_t>(j)] = -INFINITY;  // batch 0: 3 padded keys
        for (int64_t j = 0; j < k.Tk; ++j) m[static_cast<size_t>(k.Tk + j)] = -INFINITY;  // batch 1: all padded
        mask0 = Tensor::from_vector(m, {k.B, 1, 1, k.Tk}).to(dt);
      } else if (k.head_mask) {
        mask0 = testing::randn({1, k.heads, k.Tq, k.Tk}, 93 + c, dt);
      }
      Tensor qc = q0.clone().set_requires_grad(), qg = q0.to(kCuda).set_requires_grad();
      Tensor kvc = kv0.clone().set_requires_grad(), kvg = kv0.to(kCuda).set_requires_grad();
      Tensor mc, mg;
      if (mask0.defined()) {
        mc = mask0.clone();
        mg = mask0.to(kCuda);
        if (k.head_mask) {
          mc.set_requires_grad();
          mg.set_requires_grad();
        }
      }
      PhiloxStream rc(7, 3, 5), rg(7, 3, 5);
      const Tensor yc = attention(qc, kvc.slice(2, 0, H), kvc.slice(2, H, 2 * H), k.heads, mc, k.p, true, rc);
      const Tensor yg = attention(qg, kvg.slice(2, 0, H), kvg.slice(2, H, 2 * H), k.heads, mg, k.p, true, rg);
      EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
      EXPECT_EQ(rc.offset(), rg.offset()) << what << ": the streams advance alike";
      const Tensor g = testing::randn(yc.shape(), 94 + c, dt);
      yc.backward(g);
      yg.backward(g.to(kCuda));
      EXPECT_TRUE(testing::device_matches_cpu(qg.grad(), qc.grad())) << what << " dq";
      EXPECT_TRUE(testing::device_matches_cpu(kvg.grad(), kvc.grad())) << what << " dk, dv";
      if (k.head_mask) EXPECT_TRUE(testing::device_matches_cpu(mg.grad(), mc.grad())) << what << " dmask";
    }
  }
}

}  // namespace
}  // namespace lb
