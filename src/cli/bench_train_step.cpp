// Timing loop shared by the model workloads (see bench_train_step.h).
#include "src/cli/bench_train_step.h"

#include <algorithm>
#include <chrono>

#include "lb/core/allocator.h"
#include "lb/core/process_memory.h"
#include "lb/core/storage.h"
#include "lb/nn/backward/accounting.h"
#include "lb/nn/backward/calibration.h"
#include "lb/nn/backward/policy.h"
#include "lb/train/train_step.h"
#include "src/cli/bench_strategy.h"
#include "src/cli/commands.h"

namespace lb::cli {

StrategyList apply_bench_strategy(nn::Module& model, const BenchOptions& opt) {
  if (opt.recompute)
    for (const auto& [name, m] : model.named_modules()) m->set_recompute(true);
  if (opt.strategy == "vanilla" && opt.rank == 0 && opt.gx_bits == 0) return {};
  std::string where = "--strategy " + opt.strategy;
  if (opt.rank > 0) where += " --rank " + std::to_string(opt.rank);
  if (opt.gx_bits > 0) where += " --gx-bits " + std::to_string(opt.gx_bits);
  nlohmann::json settings = bench_strategy_spec(opt);
  settings.erase("type");
  const auto policy =
      nn::backward::Policy::from_json({{"strategies", {{opt.strategy, settings}}}}, where);
  StrategyList strategies = policy.apply(model, opt.strategy);
  for (const auto& st : strategies)
    if (!opt.device.is_cpu() && st->cpu_only(st->record().conv))
      throw UsageError("--device " + opt.device.str() + " --strategy " + opt.strategy + ": layer " +
                       st->record().name + "'s " + (st->record().conv ? "Conv2d" : "Linear") +
                       " kernels run on the CPU only so far");
  return strategies;
}

TrainStepTimes time_train_steps(const BenchOptions& opt, nn::Module& model, int64_t batch,
                                const std::function<Tensor()>& forward, optim::Optimizer& optimizer,
                                const StrategyList& strategies) {
  std::vector<double> fwd, bwd, upd, step;
  TrainStepTimes r;
  train::TrainStepOptions options;
  options.synchronize = true;  // on a GPU each phase ends when its queued kernels have
  options.device = opt.device;
  options.strategies = strategies;
  if (!opt.codec.empty()) {  // one rule: every kept activation, the config's defaults otherwise
    autograd::CodecRule rule;
    autograd::parse_codec(opt.codec, &rule.spec.codec);
    rule.spec.stochastic = rule.spec.codec == autograd::Codec::Int4 || rule.spec.codec == autograd::Codec::Int2;
    options.codecs = std::make_shared<autograd::CodecRules>(std::vector<autograd::CodecRule>{rule});
  }
  train::TrainStep train_step(model, optimizer, options);
  const std::vector<train::MicroBatch> micro{{batch, forward}};
  nn::backward::Calibrator calibrator(strategies);
  optimizer.zero_grad();
  for (int it = 0; it < opt.warmup + opt.iters; ++it) {
    train_step.begin_step(it);
    if (!strategies.empty()) {  // untimed: forward + backward passes without optimizer steps
      const auto c0 = BenchClock::now();
      if (calibrator.calibrate(it, [&](int64_t) { train_step.accumulate(micro, "calibration"); },
                               [&] { optimizer.zero_grad(); })) {
        r.calibration_ms += ms_since(c0, BenchClock::now());
        ++r.calibrations;
      }
    }
    if (it == opt.warmup) allocator_for(opt.device).reset_peak();
    // Saved bytes: after the last timed step's forward (a walk of the live graph, untimed).
    const bool last = it == opt.warmup + opt.iters - 1;
    const train::StepResult s = train_step.run(it, micro, last);
    if (last) r.saved_bytes = s.saved_bytes;
    if (it < opt.warmup) continue;
    r.activation_peak_bytes = std::max(r.activation_peak_bytes, s.activation_peak_bytes);
    fwd.push_back(s.forward_ms);
    bwd.push_back(s.backward_ms);
    upd.push_back(s.optimizer_ms);
    step.push_back(s.forward_ms + s.backward_ms + s.optimizer_ms);
  }
  const MemStats m = allocator_for(opt.device).stats();
  r.ms_per_step = median(step);
  r.forward_ms = median(fwd);
  r.backward_ms = median(bwd);
  r.optimizer_ms = median(upd);
  r.peak_bytes = m.total_peak;
  for (int i = 0; i < kNumMemTags; ++i) r.peak_by_tag[mem_tag_name(static_cast<MemTag>(i))] = m.peak[i];
  r.cached_bytes = m.cached;
  r.peak_rss_bytes = process_memory().max_rss_bytes;
  return r;
}

nlohmann::json train_step_json(const std::string& workload, const BenchOptions& opt,
                               const TrainStepTimes& t, int64_t parameters,
                               const nlohmann::json& extra, const StrategyList& strategies) {
  nlohmann::json j = bench_json_head(workload, opt);
  j.update({{"ms_per_step", t.ms_per_step},
            {"forward_ms", t.forward_ms},
            {"backward_ms", t.backward_ms},
            {"optimizer_ms", t.optimizer_ms},
            {"saved_bytes", t.saved_bytes},
            {"activation_peak_bytes", t.activation_peak_bytes},
            {"peak_bytes", t.peak_bytes},
            {"peak_bytes_by_tag", t.peak_by_tag},
            {"cached_bytes", t.cached_bytes},
            {"peak_rss_bytes", t.peak_rss_bytes},
            {"parameters", parameters}});
  if (!opt.codec.empty()) j["codec"] = opt.codec;
  if (opt.recompute) j["recompute"] = true;
  j.update(extra);
  if (!strategies.empty()) {
    j["strategy_spec"] = bench_strategy_spec(opt);
    j["calibrations"] = t.calibrations;
    j["calibration_ms"] = t.calibration_ms;
    j["accounting"] = nn::backward::accounting_report(strategies)["total"];
  }
  return j;
}

}  // namespace lb::cli
