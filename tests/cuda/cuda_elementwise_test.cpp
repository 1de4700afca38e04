// CPU-vs-CUDA parity of the elementwise ops (forward and backward through autograd), copies
// between layouts and dtypes, and fills: f32 at atol 1e-5 / rtol 1e-4, f64 at 1e-12. Skips
// without a CUDA device (and in a build without CUDA).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

void expect_close(const Tensor& gpu, const Tensor& cpu, double atol, double rtol, const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  const std::vector<double> g = gpu.to(Device::cpu()).to_double_vector(), c = cpu.to_double_vector();
  ASSERT_EQ(g.size(), c.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(c[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " [" << i << "]";
      continue;
    }
    ASSERT_NEAR(g[i], c[i], atol + rtol * std::abs(c[i])) << what << " [" << i << "]";
  }
}

double atol_of(DType t) { return t == DType::F32 ? 1e-5 : 1e-12; }
double rtol_of(DType t) { return t == DType::F32 ? 1e-4 : 1e-12; }

// The op on CPU and on CUDA from the same inputs; then the input gradients of sum(op · r).
void check_unary(const std::string& name, const std::function<Tensor(const Tensor&)>& op, double lo, double hi) {
  for (DType dt : {DType::F32, DType::F64}) {
    const std::string what = name + " " + dtype_name(dt);
    const Tensor x = testing::rand({3, 5, 7}, 11, lo, hi, dt);
    const Tensor r = testing::randn({3, 5, 7}, 12, dt);
    Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
    const Tensor yc = op(xc), yg = op(xg);
    expect_close(yg, yc, atol_of(dt), rtol_of(dt), what + " forward");
    yc.backward(r);
    yg.backward(r.to(kCuda));
    expect_close(xg.grad(), xc.grad(), atol_of(dt), rtol_of(dt), what + " backward");
  }
}

class CudaElementwise : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  }
};

TEST_F(CudaElementwise, UnaryOpsMatchTheCpu) {
  check_unary("add_scalar", [](const Tensor& x) { return add_scalar(x, 0.75); }, -2, 2);
  check_unary("mul_scalar", [](const Tensor& x) { return mul_scalar(x, -1.5); }, -2, 2);
  check_unary("rsub_scalar", [](const Tensor& x) { return rsub_scalar(x, 3.0); }, -2, 2);
  check_unary("pow_scalar", [](const Tensor& x) { return pow_scalar(x, 2.5); }, 0.1, 3);
  check_unary("neg", [](const Tensor& x) { return neg(x); }, -2, 2);
  check_unary("exp", [](const Tensor& x) { return exp(x); }, -5, 5);
  check_unary("log", [](const Tensor& x) { return log(x); }, 0.05, 9);
  check_unary("sqrt", [](const Tensor& x) { return sqrt(x); }, 0.05, 9);
  check_unary("rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.05, 9);
  check_unary("tanh", [](const Tensor& x) { return tanh(x); }, -4, 4);
  check_unary("sigmoid", [](const Tensor& x) { return sigmoid(x); }, -8, 8);
  check_unary("gelu", [](const Tensor& x) { return gelu(x); }, -6, 6);
  check_unary("gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApprox::Tanh); }, -6, 6);
}

TEST_F(CudaElementwise, BinaryOpsBroadcastAndBackpropLikeTheCpu) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor a = testing::rand({4, 6}, 21, 0.5, 2.0, dt), b = testing::rand({4, 6}, 22, 0.5, 2.0, dt);
    const Tensor r = testing::randn({4, 6}, 23, dt);
    using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
    for (const auto& [name, f] : std::vector<std::pair<std::string, Fn>>{
             {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); }},
             {"sub", [](const Tensor& x, const Tensor& y) { return sub(x, y); }},
             {"mul", [](const Tensor& x, const Tensor& y) { return mul(x, y); }},
             {"div", [](const Tensor& x, const Tensor& y) { return div(x, y); }}}) {
      const std::string what = name + " " + dtype_name(dt);
      Tensor ac = a.clone().set_requires_grad(), bc = b.clone().set_requires_grad();
      Tensor ag = a.to(kCuda).set_requires_grad(), bg = b.to(kCuda).set_requires_grad();
      const Tensor yc = f(ac, bc), yg = f(ag, bg);
      expect_close(yg, yc, atol_of(dt), rtol_of(dt), what);
      yc.backward(r);
      yg.backward(r.to(kCuda));
      expect_close(ag.grad(), ac.grad(), atol_of(dt), rtol_of(dt), what + " grad a");
      expect_close(bg.grad(), bc.grad(), atol_of(dt), rtol_of(dt), what + " grad b");
      // Forward with broadcasting and a transposed (strided) operand, no copies made.
      const Tensor row = testing::randn({6}, 24, dt), col = testing::randn({4, 1}, 25, dt);
      expect_close(f(ag.detach(), row.to(kCuda)), f(a, row), atol_of(dt), rtol_of(dt), what + " row");
      expect_close(f(col.to(kCuda), ag.detach()), f(col, a), atol_of(dt), rtol_of(dt), what + " col");
      const Tensor at = testing::randn({6, 4}, 26, dt);
      expect_close(f(at.to(kCuda).transpose(0, 1), bg.detach()), f(at.transpose(0, 1), b), atol_of(dt),
                   rtol_of(dt), what + " transposed");
    }
  }
}

TEST_F(CudaElementwise, InPlaceUpdatesMatchTheCpu) {
  const Tensor d = testing::randn({5, 8}, 31, DType::F32), s = testing::randn({8}, 32, DType::F32);
  Tensor dc = d.clone(), dg = d.to(kCuda);
  add_(dc, s, -0.25);
  add_(dg, s.to(kCuda), -0.25);
  expect_close(dg, dc, 1e-6, 1e-6, "add_ broadcast");
  mul_scalar_(dc, 3.0);
  mul_scalar_(dg, 3.0);
  expect_close(dg, dc, 1e-6, 1e-6, "mul_scalar_");
}

TEST_F(CudaElementwise, CopiesAndFillsAcrossLayoutsAndDtypes) {
  const Tensor x = testing::randn({4, 3, 5}, 41, DType::F64);
  const Tensor xg = x.to(kCuda);
  // Strided source, converting dtypes, on the device.
  for (DType dt : {DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64}) {
    Tensor dst = Tensor::empty({5, 3, 4}, dt, kCuda);
    dst.copy_(xg.permute({2, 1, 0}));
    Tensor ref = Tensor::empty({5, 3, 4}, dt);
    ref.copy_(x.permute({2, 1, 0}));
    expect_close(dst, ref, 0, 0, std::string("copy to ") + dtype_name(dt));
  }
  // Into a strided destination, from a broadcast source, and from the host.
  Tensor wide = Tensor::zeros({3, 8}, DType::F32, kCuda);
  wide.slice(1, 2, 6).copy_(Tensor::ones({4}, DType::F32));
  Tensor wref = Tensor::zeros({3, 8}, DType::F32);
  wref.slice(1, 2, 6).copy_(Tensor::ones({4}, DType::F32));
  expect_close(wide, wref, 0, 0, "strided destination");
  Tensor f = Tensor::full({7, 9}, -2.5, DType::F32, kCuda);
  expect_close(f, Tensor::full({7, 9}, -2.5, DType::F32), 0, 0, "fill");
}

}  // namespace
}  // namespace lb
