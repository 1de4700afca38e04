// Workload conv_bwd: one 3×3 Conv2d 64 -> 64, stride 1, padding 1, with bias, on
// x (64, 64, 32, 32) f32 (a ResNet-on-CIFAR stage-1 layer). As linear_bwd: weights are
// parameters, x requires grad, each iteration drops the leaf grads, times the forward, then
// the backward from a fixed g_y. --strategy / --rank as in linear_bwd (bench_strategy.h); the
// paper metrics use the GEMM view L = 32·32, I = 64·3·3, O = 64.
#include "lb/autograd/node.h"
#include "lb/core/tensor.h"
#include "lb/nn/backward/strategy.h"
#include "lb/nn/init.h"
#include "lb/ops/conv.h"
#include "src/cli/bench_strategy.h"
#include "src/cli/bench_workloads.h"

namespace lb::cli {

nlohmann::json bench_conv_bwd(const BenchOptions& opt) {
  constexpr int64_t kN = 64, kC = 64, kH = 32, kO = 64, kK = 3;
  Conv2dArgs args;
  args.padding = {1, 1};
  // Bias in ±1/√(64·9), PyTorch's Conv2d bias init.
  LayerOperands ops = layer_operands(opt, {kO, kC, kK, kK}, kC * kK * kK, 1.0 / 24, {kN, kC, kH, kH}, {kN, kO, kH, kH});
  Tensor &w = ops.w, &b = ops.b, &x = ops.x, &g = ops.g;  // (clang < 16 cannot capture bindings)

  const auto strategy = bench_strategy(opt);  // null: the plain exact op
  auto forward = [&] {
    return strategy ? nn::backward::strategy_conv2d(x, w, b, args, strategy) : conv2d(x, w, b, args);
  };
  constexpr int64_t kL = kH * kH, kI = kC * kK * kK;
  // Forward and the two backward GEMMs of the im2col view, (N·L, I, O) each (vanilla work
  // over the measured time for compressed strategies: an effective rate).
  const double flops = 3 * 2.0 * kN * kL * kI * kO;
  nlohmann::json r = bench_layer("conv_bwd", opt, strategy, forward, g, {x, w, b}, flops,
                                 {kN, kL, kI, kO});
  r["shape"] = {{"x", {kN, kC, kH, kH}}, {"w", {kO, kC, kK, kK}}, {"bias", true},
                {"stride", 1}, {"padding", 1}};
  return r;
}

}  // namespace lb::cli
