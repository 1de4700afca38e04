// The whole step's levers besides activations (see step_levers.h).
#include "src/train/memory/step_levers.h"

#include <algorithm>

#include "lb/core/error.h"
#include "lb/optim/state_codec.h"
#include "lb/train/memory/memory_report.h"
#include "src/train/memory/memory_plan_parts.h"

namespace lb::train {

std::string StepLevers::name() const {
  std::string n = state_bits == 32 ? "f32 optimizer state" : std::to_string(state_bits) + "-bit optimizer state";
  return in_backward ? n + ", updated in backward" : n;
}

nlohmann::json FixedBytes::to_json() const {
  return {{"parameters", parameters}, {"buffers", buffers}, {"gradients", gradients}, {"optimizer", optimizer}};
}

FixedBytes FixedBytes::from_json(const nlohmann::json& j, const std::string& source) {
  LB_CHECK(j.is_object(), source, ": fixed_bytes: expected an object, got ", j.dump());
  FixedBytes f;
  const auto get = [&](const char* key) {
    const nlohmann::json& v = j.contains(key) ? j.at(key) : nlohmann::json();
    LB_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, source, ": fixed_bytes.", key,
             ": expected a whole number of bytes, got ", v.dump());
    return v.get<int64_t>();
  };
  f.parameters = get("parameters");
  f.buffers = get("buffers");
  f.gradients = get("gradients");
  f.optimizer = get("optimizer");
  return f;
}

namespace planning {

namespace {
// Priors, as the codecs' (memory_plan_parts.cpp), for what has no gradient cosine to measure:
// coded moments perturb the update, not the gradient. 8-bit state is taken as int8 activations
// (MRPC seed 1: dev 82.15 against 81.76 in f32, tools/studies/optimizer_state), 4-bit as four
// times that (83.44 at that seed: no loss seen, but the codes are coarser). The update in
// backward is exact without clipping; with it, the clipping uses the previous step's norm
// (MRPC seed 1: 81.66 against 81.76), taken as bf16 activations.
constexpr double kState8Prior = 6e-4, kState4Prior = 2.4e-3, kLaggedClipPrior = 1e-4;

double lever_fidelity(const Config& c, const StepLevers& l) {
  double f = 0;
  if (l.state_bits != c.optimizer.state_bits) f += l.state_bits == 8 ? kState8Prior : kState4Prior;
  if (l.in_backward && !c.optimizer.in_backward && c.train.max_grad_norm > 0) f += kLaggedClipPrior;
  return f;
}

// A batch of two examples (text: 16 tokens): what parameters, gradients and optimizer state
// take does not depend on the batch, and two examples keep BatchNorm's batch statistics defined.
Config tiny_batch(Config c) {
  c.data.batch_size = std::min<int64_t>(c.data.batch_size, 2);
  if (c.model.type == "bert") c.data.max_seq_len = std::min<int64_t>(c.data.max_seq_len, 16);
  return c;
}
}  // namespace

Config with_levers(Config c, const StepLevers& l) {
  c.optimizer.state_bits = l.state_bits;
  c.optimizer.in_backward = l.in_backward;
  return c;
}

double lever_cost(const LeverOption& o, double exact_ms, double weight) { return weight * o.fidelity * exact_ms; }

std::vector<LeverOption> measure_levers(const Config& config, const std::string& strategy, bool data_parallel,
                                        int64_t budget_bytes, const PlanWatch& watch) {
  const bool adam = config.optimizer.type == "adam" || config.optimizer.type == "adamw";
  std::vector<int64_t> bits{config.optimizer.state_bits};
  if (adam)
    for (const int64_t b : {8, 4})
      if (b < config.optimizer.state_bits) bits.push_back(b);
  std::vector<bool> fused{config.optimizer.in_backward};
  if (!config.optimizer.in_backward && !data_parallel) fused.push_back(true);
  std::vector<StepLevers> settings;  // the config's own first
  for (const bool f : fused)
    for (const int64_t b : bits) settings.push_back({b, f});
  const Config tiny = tiny_batch(with_memory(config, {}, {}));
  int64_t held = 0;  // the last measurement's most
  const auto measure = [&](const StepLevers& l, size_t k, size_t n) {
    watch.check(config);
    const MemoryReport r = memory_report(with_levers(tiny, l), strategy, 0, 0, /*steady_step=*/true);
    watch.held(r.run_peak_bytes);
    held = r.run_peak_bytes;
    watch.profiled("the step's state with " + l.name(), k, n, "2 short examples", r.steady_peak_bytes, 0, "whole step");
    FixedBytes f;
    f.parameters = r.steady_peak_by_tag[static_cast<int>(MemTag::Parameter)];
    f.buffers = r.steady_peak_by_tag[static_cast<int>(MemTag::Buffer)];
    f.gradients = r.steady_peak_by_tag[static_cast<int>(MemTag::Gradient)];
    f.optimizer = r.steady_peak_by_tag[static_cast<int>(MemTag::Optimizer)];
    return f;
  };
  // The leanest setting first. Under a budget in bytes, another is measured only where its
  // measurement is predicted (from the leanest's, with the state's and gradients' bytes
  // changed) to hold no more than the budget: one that holds more leaves no room for a batch's
  // activations anyway.
  const StepLevers& lean = settings.back();
  const FixedBytes least = measure(lean, 1, settings.size());
  const int64_t least_held = held;
  const double per_element = state_bytes_per_element(config, lean.state_bits);
  const double elements = per_element > 0 ? static_cast<double>(least.optimizer) / per_element : -1;
  std::vector<LeverOption> out(settings.size());
  size_t n = 1;
  for (size_t i = 0; i < settings.size(); ++i) {
    LeverOption& o = out[i];
    o.levers = settings[i];
    o.fidelity = lever_fidelity(config, o.levers);
    o.fixed = least;
    if (i + 1 == settings.size() || budget_bytes <= 0 || elements < 0) {
      n += i + 1 < settings.size();
      continue;
    }
    o.fixed.optimizer = static_cast<int64_t>(elements * state_bytes_per_element(config, o.levers.state_bits));
    if (!o.levers.in_backward) o.fixed.gradients = std::max(least.gradients, static_cast<int64_t>(elements * 4));
    o.unmeasured = least_held + o.fixed.total() - least.total() > budget_bytes;
    n += !o.unmeasured;
  }
  size_t k = 1;
  for (size_t i = 0; i + 1 < settings.size(); ++i)
    if (!out[i].unmeasured) out[i].fixed = measure(out[i].levers, ++k, n);
  out.erase(std::remove_if(out.begin(), out.end(), [](const LeverOption& o) { return o.unmeasured; }), out.end());
  return out;
}

double state_bytes_per_element(const Config& c, int64_t bits) {
  if (c.optimizer.type == "adam" || c.optimizer.type == "adamw") {
    if (bits == 32) return 8;
    const optim::StateCodec m = optim::moment_codec(static_cast<int>(bits));
    const optim::StateCodec v = optim::second_moment_codec(static_cast<int>(bits));
    return 2.0 * static_cast<double>(bits) / 8 + 4.0 / static_cast<double>(m.block) + 4.0 / static_cast<double>(v.block);
  }
  return 0;  // SGD: its momentum buffer or nothing; not predicted
}

}  // namespace planning
}  // namespace lb::train
