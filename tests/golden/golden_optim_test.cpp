// Optimizers and LR schedules against PyTorch (fixtures from tools/golden/gen_optim.py):
// three steps from the same parameters and gradients must give the same parameters.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "lb/optim/optimizer.h"
#include "testing/testing.h"

namespace lb::optim {
namespace {

using Make = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

TEST(GoldenOptim, ThreeStepsMatchPyTorch) {
  const std::map<std::string, Make> cases = {
      {"sgd_plain", [](auto g) { g[0].lr = 0.1; return std::make_unique<SGD>(g); }},
      {"sgd_momentum_wd",
       [](auto g) {
         g[0].lr = 0.1;
         g[0].weight_decay = 0.01;
         return std::make_unique<SGD>(g, SgdOptions{0.9, 0.0, false});
       }},
      {"sgd_nesterov",
       [](auto g) { g[0].lr = 0.05; return std::make_unique<SGD>(g, SgdOptions{0.8, 0.0, true}); }},
      {"sgd_dampening",
       [](auto g) { g[0].lr = 0.05; return std::make_unique<SGD>(g, SgdOptions{0.8, 0.3, false}); }},
      {"adam_l2",
       [](auto g) {
         g[0].lr = 0.01;
         g[0].weight_decay = 0.1;
         return std::make_unique<Adam>(g, AdamOptions{0.9, 0.99, 1e-6, false});
       }},
      {"adamw",
       [](auto g) {
         g[0].lr = 0.01;
         g[0].weight_decay = 0.05;
         return std::make_unique<Adam>(g, AdamOptions{0.85, 0.995, 1e-8, true});
       }},
  };
  for (const DType dt : {DType::F64, DType::F32}) {
    for (const auto& [name, make] : cases) {
      SCOPED_TRACE(name + std::string(" ") + dtype_name(dt));
      const auto f = testing::load_fixture("optim_" + name);
      Tensor p = Tensor::empty(f.at("p0").shape(), dt);
      p.copy_(f.at("p0"));
      p.set_requires_grad();
      auto opt = make(single_group({{"p", p}}, 0.0));
      for (int s = 1; s <= 3; ++s) {
        p.set_grad(f.at("g" + std::to_string(s)).to(dt).contiguous());
        opt->step();
        const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
        EXPECT_TRUE(testing::all_close(p, f.at("p" + std::to_string(s)), tol, tol)) << "step " << s;
      }
    }
  }
}

}  // namespace
}  // namespace lb::optim
