// Backward-strategy selection for the layer benchmarks (linear_bwd, conv_bwd), generic over
// the factory's types so a new strategy needs no bench changes:
//   --strategy vanilla        the plain exact op (what the PyTorch twins measure)
//   --strategy S [--rank N]   the strategy built by make_strategy({"type": S, "rank": N}),
//                             calibrated (if it asks) by one forward/backward on the bench's
//                             own data before the timed iterations.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>

#include <nlohmann/json.hpp>

#include "lb/nn/backward/strategy.h"
#include "src/cli/bench_workloads.h"

namespace lb::cli {

// {"type": strategy} plus {"rank": N} when --rank was given; validated by the factory.
nlohmann::json bench_strategy_spec(const BenchOptions& opt);
// Null for plain vanilla (no --rank), else the strategy.
std::shared_ptr<nn::backward::Strategy> bench_strategy(const BenchOptions& opt);
// Runs `pass` (one forward + backward, grads dropped after) in calibration mode when the
// strategy needs calibration at step 0 (INSTANT's bases, HOT's LQS choice); returns its wall
// time in ms (0 when none ran).
double bench_calibrate(nn::backward::Strategy& s, const std::function<void()>& pass);
// Adds the strategy's settings, paper metrics per sample for geometry g (vanilla's when s is
// null), chosen ranks (INSTANT) and the strategy's own report to r.
void bench_strategy_fields(nlohmann::json& r, const nn::backward::Strategy* s,
                           const nn::backward::LayerGeometry& g);

// The timing loop shared by the layer benchmarks: calibrates `strategy` if it asks, then for
// warmup + iters iterations drops the leaves' grads, times forward() and backward(g_y), and
// checks every leaf got a gradient. Returns the common JSON fields (workload, strategy,
// iters, medians, saved_bytes measured after forward, gflops from `flops_per_step`,
// calibration_ms, threads) with the strategy's fields for geometry `geom`.
nlohmann::json bench_layer(const std::string& workload, const BenchOptions& opt,
                           const std::shared_ptr<nn::backward::Strategy>& strategy,
                           const std::function<Tensor()>& forward, const Tensor& g_y,
                           std::vector<Tensor> leaves, double flops_per_step,
                           const nn::backward::LayerGeometry& geom);

// A layer benchmark's operands: w initialised as PyTorch does the layer's (Kaiming uniform
// over `fan_in`) and b uniform in ±bias_bound, x and g_y standard normal, all on the bench's
// --device (w and b tagged as parameters); w, b and x require gradients.
struct LayerOperands {
  Tensor w, b, x, g;
};
LayerOperands layer_operands(const BenchOptions& opt, const Shape& w_shape, int64_t fan_in, double bias_bound,
                             const Shape& x_shape, const Shape& g_shape);

}  // namespace lb::cli
