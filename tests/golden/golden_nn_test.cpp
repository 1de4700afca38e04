// NN ops against PyTorch (fixtures from tools/golden/gen_nn.py): forward output, every input
// gradient of sum(y * r), and batch_norm's updated running statistics, run in f32 and f64.
// Dropout has no golden (different RNGs); nn_ops_test.cpp tests it statistically.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType d) { return d == DType::F32 ? Tol{1e-4, 1e-5} : Tol{1e-10, 1e-12}; }

// A case: runs the op on the fixture's (converted) inputs; `grad_inputs` names the inputs
// whose gradients (g_<name>) are compared.
struct Case {
  std::vector<std::string> grad_inputs;
  std::function<Tensor(const io::SafetensorsFile&, std::map<std::string, Tensor>&)> run;
};

const std::map<std::string, Case>& cases() {
  static const std::map<std::string, Case> m = {
      {"softmax_last", {{"x"}, [](auto&, auto& in) { return softmax(in["x"], -1); }}},
      {"softmax_dim1", {{"x"}, [](auto&, auto& in) { return softmax(in["x"], 1); }}},
      {"log_softmax_last", {{"x"}, [](auto&, auto& in) { return log_softmax(in["x"], -1); }}},
      {"log_softmax_dim0", {{"x"}, [](auto&, auto& in) { return log_softmax(in["x"], 0); }}},
      {"softmax_masked",
       {{"x", "mask"}, [](auto&, auto& in) { return softmax(in["x"], -1, in["mask"]); }}},
      {"log_softmax_masked",
       {{"x", "mask"}, [](auto&, auto& in) { return log_softmax(in["x"], -1, in["mask"]); }}},
      {"softmax_masked_inf",
       {{"x"}, [](auto&, auto& in) { return softmax(in["x"], -1, in["mask"]); }}},
      {"layer_norm",
       {{"x", "weight", "bias"},
        [](auto&, auto& in) { return layer_norm(in["x"], in["weight"], in["bias"]); }}},
      {"layer_norm_plain",
       {{"x"}, [](auto&, auto& in) { return layer_norm(in["x"], Tensor(), Tensor()); }}},
      {"embedding",
       {{"weight"}, [](auto& f, auto& in) { return embedding(f.at("indices"), in["weight"]); }}},
      {"embedding_padding",
       {{"weight"}, [](auto& f, auto& in) { return embedding(f.at("indices"), in["weight"], 2); }}},
      {"mse_loss",
       {{"input", "target"}, [](auto&, auto& in) { return mse_loss(in["input"], in["target"]); }}},
  };
  return m;
}

class GoldenNN : public ::testing::TestWithParam<DType> {};

// Loads every floating tensor of the fixture as a leaf of dtype dt requiring grad.
std::map<std::string, Tensor> float_inputs(const io::SafetensorsFile& f, DType dt) {
  std::map<std::string, Tensor> in;
  for (const auto& [name, t] : f.tensors) {
    if (!dtype_is_floating(t.dtype())) continue;
    Tensor c = t.to(dt).contiguous().clone();
    c.set_requires_grad(true);
    in[name] = c;
  }
  return in;
}

void check_outputs(const io::SafetensorsFile& f, std::map<std::string, Tensor>& in, const Tensor& y,
                   const std::vector<std::string>& grad_inputs, DType dt) {
  const Tol t = tol_for(dt);
  EXPECT_TRUE(testing::all_close(y, f.at("y"), t.rtol, t.atol)) << "y";
  sum(mul(y, f.at("r").to(dt))).backward();
  for (const auto& name : grad_inputs) {
    ASSERT_TRUE(in[name].grad().defined()) << name;
    EXPECT_TRUE(testing::all_close(in[name].grad(), f.at("g_" + name), t.rtol, t.atol))
        << "g_" << name;
  }
}

TEST_P(GoldenNN, Ops) {
  const DType dt = GetParam();
  for (const auto& [name, c] : cases()) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture("nn_" + name);
    auto in = float_inputs(f, dt);
    const Tensor y = c.run(f, in);
    check_outputs(f, in, y, c.grad_inputs, dt);
  }
}

TEST_P(GoldenNN, BatchNorm) {
  const DType dt = GetParam();
  const Tol t = tol_for(dt);
  for (const auto& [name, training] : std::vector<std::pair<std::string, bool>>{
           {"batch_norm_train", true}, {"batch_norm_train_1d", true}, {"batch_norm_eval", false}}) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture("nn_" + name);
    auto in = float_inputs(f, dt);
    Tensor rm = f.at("running_mean").to(dt).clone(), rv = f.at("running_var").to(dt).clone();
    const Tensor y = batch_norm(in["x"], in["weight"], in["bias"], rm, rv, training, 0.1, 1e-5);
    EXPECT_TRUE(testing::all_close(rm, f.at("running_mean_after"), t.rtol, t.atol));
    EXPECT_TRUE(testing::all_close(rv, f.at("running_var_after"), t.rtol, t.atol));
    check_outputs(f, in, y, {"x", "weight", "bias"}, dt);
  }
}

TEST_P(GoldenNN, CrossEntropy) {
  const DType dt = GetParam();
  for (const std::string name : {"cross_entropy", "cross_entropy_ignore",
                                 "cross_entropy_ignore_smooth", "cross_entropy_smooth"}) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture("nn_" + name);
    auto in = float_inputs(f, dt);
    const double ls = f.at("label_smoothing").item_double();
    const Tensor y = cross_entropy(in["logits"], f.at("targets"), -100, ls);
    check_outputs(f, in, y, {"logits"}, dt);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GoldenNN, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lb
