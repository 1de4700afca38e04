// Strategy selection, calibration and reporting shared by the layer benchmarks.
#include "src/cli/bench_strategy.h"

#include <chrono>
#include <iostream>

#include "lb/autograd/node.h"
#include "lb/core/cuda_runtime_info.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/init.h"
#include "src/cli/commands.h"

namespace lb::cli {

nlohmann::json bench_strategy_spec(const BenchOptions& opt) {
  nlohmann::json spec = {{"type", opt.strategy}};
  if (opt.rank > 0) spec["rank"] = opt.rank;
  if (opt.gx_bits > 0) spec["gx_bits"] = opt.gx_bits;
  return spec;
}

std::shared_ptr<nn::backward::Strategy> bench_strategy(const BenchOptions& opt) {
  if (opt.strategy == "vanilla" && opt.rank == 0 && opt.gx_bits == 0) return nullptr;
  std::string where = "bench --strategy " + opt.strategy;
  if (opt.rank > 0) where += " --rank " + std::to_string(opt.rank);
  if (opt.gx_bits > 0) where += " --gx-bits " + std::to_string(opt.gx_bits);
  // --rank is INSTANT's setting, --gx-bits HOT's; other strategies would reject them as unknown keys.
  if (opt.rank > 0 && opt.strategy != "instant")
    throw UsageError("--rank sets INSTANT's fixed rank; it needs --strategy instant (got --strategy " +
                     opt.strategy + ")");
  if (opt.gx_bits > 0 && opt.strategy != "hot")
    throw UsageError("--gx-bits sets HOT's g_x levels; it needs --strategy hot (got --strategy " + opt.strategy +
                     ")");
  std::shared_ptr<nn::backward::Strategy> s = nn::backward::make_strategy(bench_strategy_spec(opt), where);
  s->set_layer("bench", 0);
  if (!opt.device.is_cpu() && s->cpu_only(false))
    throw UsageError("--device " + opt.device.str() + " --strategy " + opt.strategy + ": " + opt.strategy +
                     "'s Linear kernels run on the CPU only so far");
  return s;
}

double bench_calibrate(nn::backward::Strategy& s, const std::function<void()>& pass) {
  if (!s.calibration() || !s.calibration()->needs_calibration(0)) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  s.begin_calibration();
  pass();
  s.finish_calibration();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void bench_strategy_fields(nlohmann::json& r, const nn::backward::Strategy* s,
                           const nn::backward::LayerGeometry& g) {
  std::shared_ptr<nn::backward::Strategy> vanilla;
  if (!s) {
    vanilla = nn::backward::make_strategy({{"type", "vanilla"}}, "bench");
    s = vanilla.get();
  }
  r["strategy_spec"] = s->hyperparams();
  // Paper metrics (docs/algorithms.md "Accounting"): backward GEMM FLOPs and saved input per sample.
  r["backward_mflops_per_sample"] = s->paper_backward_flops(g) / 1e6;
  r["saved_mib_fp32_per_sample"] = s->paper_saved_bytes_fp32(g) / (1024.0 * 1024.0);
  if (vanilla) return;
  const nn::backward::StrategySummary sum = s->summary();
  if (sum.ranks) {
    using Rank = nn::backward::StrategySummary::OperandRank;
    // A fixed rank above the projected dimension n runs at n: say so, never silently.
    const int64_t asked = s->hyperparams().value("rank", int64_t{0});
    const auto warn_capped = [&](const char* t, const Rank& o) {
      if (asked <= o.rank || o.rank != o.n || o.n <= 0) return;
      const std::string w = std::string("--rank ") + std::to_string(asked) + " exceeds " + t + "'s projected dimension " +
                            std::to_string(o.n) + " (" + o.axis + " axis); INSTANT runs at rank " + std::to_string(o.n);
      std::cerr << "leanback bench: warning: " << w << "\n";
      r["warnings"].push_back(w);
    };
    warn_capped("x", sum.ranks->x);
    warn_capped("g_y", sum.ranks->g_y);
    const auto axis = [](const Rank& o) { return o.valid ? o.axis : std::string("none"); };
    r["ranks"] = {{"x", sum.ranks->x.rank},
                  {"g_y", sum.ranks->g_y.rank},
                  {"x_axis", axis(sum.ranks->x)},
                  {"g_y_axis", axis(sum.ranks->g_y)}};
  }
  if (sum.quantizer) r["quantizer"] = *sum.quantizer;
  r["strategy_report"] = s->report();
}

nlohmann::json bench_layer(const std::string& workload, const BenchOptions& opt,
                           const std::shared_ptr<nn::backward::Strategy>& strategy,
                           const std::function<Tensor()>& forward, const Tensor& g_y,
                           std::vector<Tensor> leaves, double flops_per_step,
                           const nn::backward::LayerGeometry& geom) {
  auto drop_grads = [&] {
    for (Tensor& t : leaves) t.zero_grad();
  };
  const double calib_ms = strategy ? bench_calibrate(*strategy, [&] {
    forward().backward(g_y);
    drop_grads();
  }) : 0.0;
  std::vector<double> fwd, bwd, step;
  int64_t saved = 0;
  // On a GPU a phase ends when its queued kernels have.
  const auto sync = [&] {
    if (opt.device.is_cuda()) cuda_synchronize(opt.device.index);
  };
  for (int it = 0; it < opt.warmup + opt.iters; ++it) {
    drop_grads();
    sync();
    const auto t0 = BenchClock::now();
    Tensor y = forward();
    sync();
    const auto t1 = BenchClock::now();
    saved = autograd::saved_bytes();  // after forward, before backward
    const auto t2 = BenchClock::now();
    y.backward(g_y);
    sync();
    const auto t3 = BenchClock::now();
    for (const Tensor& t : leaves)
      LB_CHECK(t.grad().defined(), "bench ", workload, ": a gradient is missing");
    if (it < opt.warmup) continue;
    fwd.push_back(ms_since(t0, t1));
    bwd.push_back(ms_since(t2, t3));
    step.push_back(fwd.back() + bwd.back());
  }
  const double ms = median(step);
  nlohmann::json r = bench_json_head(workload, opt);
  r.update({{"ms_per_step", ms},
            {"forward_ms", median(fwd)},
            {"backward_ms", median(bwd)},
            {"saved_bytes", saved},
            {"calibration_ms", calib_ms}});
  // The exact step's FLOPs over the time: real throughput for vanilla; for a compressed
  // strategy only a vanilla-equivalent rate (it does fewer FLOPs), reported under its own key.
  const double rate = ms > 0 ? flops_per_step / (ms * 1e6) : 0.0;
  r[strategy ? "vanilla_equivalent_gflops" : "gflops"] = rate;
  bench_strategy_fields(r, strategy.get(), geom);
  return r;
}

LayerOperands layer_operands(const BenchOptions& opt, const Shape& w_shape, int64_t fan_in, double bias_bound,
                             const Shape& x_shape, const Shape& g_shape) {
  LayerOperands o;
  o.w = Tensor::empty(w_shape, DType::F32, Device::cpu(), MemTag::Parameter);
  o.b = Tensor::empty({w_shape[0]}, DType::F32, Device::cpu(), MemTag::Parameter);
  nn::init::kaiming_uniform_default_(o.w, fan_in);
  nn::init::uniform_(o.b, -bias_bound, bias_bound);
  o.x = Tensor::empty(x_shape);
  o.g = Tensor::empty(g_shape);
  nn::init::normal_(o.x, 0.0, 1.0);
  nn::init::normal_(o.g, 0.0, 1.0);
  if (!opt.device.is_cpu()) {
    for (Tensor* p : {&o.w, &o.b}) {
      *p = p->to(opt.device);
      p->storage()->set_tag(MemTag::Parameter);
    }
    for (Tensor* t : {&o.x, &o.g}) *t = t->to(opt.device);
  }
  for (Tensor* t : {&o.w, &o.b, &o.x}) t->set_requires_grad(true);
  return o;
}

}  // namespace lb::cli
