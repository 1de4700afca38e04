// Workload linear_bwd (docs/design.md "Benchmark workloads"): one hidden-layer Linear 768 -> 3072
// with bias on x (32, 128, 768) f32. The weights are parameters requiring grad and x is an
// activation requiring grad, so backward computes g_x, g_w and g_b like a hidden layer does.
// Each iteration: drop the leaf grads (as zero_grad(set_to_none=True)), time the forward,
// then the backward from a fixed g_y. tools/bench/linear_bwd.py is the PyTorch twin.
// --strategy S (other than plain vanilla) runs the layer through that backward strategy
// (bench_strategy.h), calibrated once on this data before timing; --rank N fixes its rank.
#include "lb/autograd/node.h"
#include "lb/core/tensor.h"
#include "lb/nn/init.h"
#include "lb/ops/linalg.h"
#include "lb/nn/backward/strategy.h"
#include "src/cli/bench_strategy.h"
#include "src/cli/bench_workloads.h"

namespace lb::cli {

nlohmann::json bench_linear_bwd(const BenchOptions& opt) {
  constexpr int64_t kB = 32, kT = 128, kIn = 768, kOut = 3072;
  // Bias in ±1/√768, PyTorch's Linear bias init.
  LayerOperands ops = layer_operands(opt, {kOut, kIn}, kIn, 0.036, {kB, kT, kIn}, {kB, kT, kOut});
  Tensor &w = ops.w, &b = ops.b, &x = ops.x, &g = ops.g;  // (clang < 16 cannot capture bindings)

  const auto strategy = bench_strategy(opt);  // null: the plain exact op
  auto forward = [&] {
    return strategy ? nn::backward::strategy_linear(x, w, b, strategy) : linear(x, w, b);
  };
  // Forward x wᵀ, backward g_y w and g_yᵀ x: three (M, 768, 3072) GEMMs (for a compressed
  // strategy this is the vanilla work over its time: an effective rate).
  const double flops = 3 * 2.0 * kB * kT * kIn * kOut;
  nlohmann::json r = bench_layer("linear_bwd", opt, strategy, forward, g, {x, w, b}, flops,
                                 {kB, kT, kIn, kOut});
  r["shape"] = {{"x", {kB, kT, kIn}}, {"w", {kOut, kIn}}, {"bias", true}};
  return r;
}

}  // namespace lb::cli
