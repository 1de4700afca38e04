// Elementwise ops and reductions against PyTorch (fixtures from tools/golden/gen_elementwise.py):
// forward output and input gradients of sum(y * r), run in f32 and f64.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

const std::map<std::string, Unary>& unary_cases() {
  static const std::map<std::string, Unary> m = {
      {"neg", [](auto& a) { return neg(a); }},
      {"exp", [](auto& a) { return exp(a); }},
      {"log", [](auto& a) { return log(a); }},
      {"sqrt", [](auto& a) { return sqrt(a); }},
      {"rsqrt", [](auto& a) { return rsqrt(a); }},
      {"tanh", [](auto& a) { return tanh(a); }},
      {"sigmoid", [](auto& a) { return sigmoid(a); }},
      {"relu", [](auto& a) { return relu(a); }},
      {"gelu", [](auto& a) { return gelu(a); }},
      {"gelu_tanh", [](auto& a) { return gelu(a, GeluApprox::Tanh); }},
      {"add_scalar", [](auto& a) { return add_scalar(a, 2.5); }},
      {"mul_scalar", [](auto& a) { return mul_scalar(a, -1.5); }},
      {"rsub_scalar", [](auto& a) { return rsub_scalar(a, 1.0); }},
      {"pow_scalar", [](auto& a) { return pow_scalar(a, 2.5); }},
      {"sum_all", [](auto& a) { return sum(a); }},
      {"sum_dim1", [](auto& a) { return sum(a, {1}); }},
      {"sum_dims02_keep", [](auto& a) { return sum(a, {0, 2}, true); }},
      {"mean_last", [](auto& a) { return mean(a, {-1}); }},
      {"max_dim1", [](auto& a) { return max(a, 1); }},
  };
  return m;
}

const std::map<std::string, Binary>& binary_cases() {
  static const std::map<std::string, Binary> m = {
      {"add", [](auto& a, auto& b) { return add(a, b); }},
      {"sub", [](auto& a, auto& b) { return sub(a, b); }},
      {"mul", [](auto& a, auto& b) { return mul(a, b); }},
      {"div", [](auto& a, auto& b) { return div(a, b); }},
  };
  return m;
}

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType d) { return d == DType::F32 ? Tol{1e-4, 1e-5} : Tol{1e-10, 1e-12}; }

class GoldenElementwise : public ::testing::TestWithParam<DType> {};

TEST_P(GoldenElementwise, UnaryAndReductions) {
  const DType dt = GetParam();
  const Tol t = tol_for(dt);
  for (const auto& [name, fn] : unary_cases()) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture("elementwise_" + name);
    Tensor a = f.at("a").to(dt).contiguous();
    a.set_requires_grad();
    Tensor y = fn(a);
    EXPECT_TRUE(testing::all_close(y, f.at("y"), t.rtol, t.atol));
    sum(mul(y, f.at("r").to(dt))).backward();
    EXPECT_TRUE(testing::all_close(a.grad(), f.at("ga"), t.rtol, t.atol));
  }
}

TEST_P(GoldenElementwise, BinaryBroadcast) {
  const DType dt = GetParam();
  const Tol t = tol_for(dt);
  for (const auto& [name, fn] : binary_cases()) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture("elementwise_" + name);
    Tensor a = f.at("a").to(dt), b = f.at("b").to(dt);
    a.set_requires_grad();
    b.set_requires_grad();
    Tensor y = fn(a, b);
    EXPECT_TRUE(testing::all_close(y, f.at("y"), t.rtol, t.atol));
    sum(mul(y, f.at("r").to(dt))).backward();
    EXPECT_TRUE(testing::all_close(a.grad(), f.at("ga"), t.rtol, t.atol));
    EXPECT_TRUE(testing::all_close(b.grad(), f.at("gb"), t.rtol, t.atol));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GoldenElementwise, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lb
