// The memory plan: its lookups, table, JSON file and application to a config (memory_planner.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "lb/core/error.h"
#include "lb/io/json_file.h"
#include "lb/train/memory/memory_report.h"
#include "src/backend/kernel_info.h"
#include "src/train/memory/memory_plan_parts.h"

namespace lb::train {

using namespace planning;  // NOLINT: the parts' shared helpers (memory_plan_parts.h)

int MemoryPlan::length_plan_for(int64_t longest, int64_t tokens) const {
  int by_len = -1, by_tokens = -1;
  for (int i = 0; i < static_cast<int>(by_length.size()); ++i) {
    const LengthPlan& l = by_length[static_cast<size_t>(i)];
    if (l.max_len < longest) continue;
    if (l.max_tokens == 0) {
      if (by_len < 0 || l.max_len < by_length[static_cast<size_t>(by_len)].max_len) by_len = i;
    } else if (tokens > 0 && l.max_tokens >= tokens) {
      if (by_tokens < 0 || l.max_tokens < by_length[static_cast<size_t>(by_tokens)].max_tokens) by_tokens = i;
    }
  }
  if (by_len < 0 || by_tokens < 0) return std::max(by_len, by_tokens);
  const LengthPlan &l = by_length[static_cast<size_t>(by_len)], &t = by_length[static_cast<size_t>(by_tokens)];
  if (l.exact_step_ms <= 0 || t.exact_step_ms <= 0)  // plans from before exact_step_ms: their times
    return t.predicted_step_ms < l.predicted_step_ms ? by_tokens : by_len;
  return t.predicted_step_ms / t.exact_step_ms < l.predicted_step_ms / l.exact_step_ms ? by_tokens : by_len;
}

std::string LengthPlan::label() const {
  return max_tokens > 0 ? std::to_string(max_tokens) + " real tokens" : std::to_string(max_len);
}

std::string LengthPlan::batches() const {
  return max_tokens > 0 ? "at most " + std::to_string(max_tokens) + " real tokens"
                        : "sequences of at most " + std::to_string(max_len) + " tokens";
}

std::string MemoryPlan::summary() const {
  std::vector<std::pair<std::string, int>> counts;
  std::string rest = "exact";
  for (const auto& part : parts) {
    if (part.part == "(rest)") {
      rest = part.option.name();
      continue;
    }
    const std::string n = part.option.name();
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == n; });
    if (it == counts.end()) counts.emplace_back(n, 1);
    else ++it->second;
  }
  std::string s;
  for (const auto& [name, n] : counts) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  return s + "; rest " + rest;
}

nlohmann::json plan_inputs(const Config& config, const std::string& strategy) {
  const nlohmann::json c = config.to_json();
  nlohmann::json in = {{"model", c.at("model")},
                       {"backward", config.backward.resolved_json()},
                       {"strategy", strategy},
                       {"freeze", c.value("freeze", nlohmann::json())},
                       {"lora", c.value("lora", nlohmann::json())},
                       {"precision", config.train.precision},
                       {"optimizer", {{"type", config.optimizer.type},
                                      {"state_bits", config.optimizer.state_bits},
                                      {"in_backward", config.optimizer.in_backward},
                                      {"clipping", config.train.max_grad_norm > 0}}},
                       {"grad_accum", config.train.grad_accum}};
  const nlohmann::json& d = c.at("data");
  for (const char* k : {"task", "batch_size", "max_seq_len", "padding", "vocab"})
    in["data"][k] = d.value(k, nlohmann::json());
  return in;
}

MemoryPlan load_memory_plan(const std::string& file, const Config& config, const std::string& strategy) {
  MemoryPlan plan = MemoryPlan::from_json(io::read_json_file(file), file);
  const bool step = config.memory.budget ? config.memory.budget->whole_step() : plan.scope == BudgetScope::Step;
  const std::string again = "; make one for this run: leanback plan " + config.source +
                            (step ? " --memory-budget " : " --activation-budget ") +
                            (config.memory.budget ? config.memory.budget->text : plan.budget_text) + " --json > FILE";
  LB_CHECK(!plan.profiled_on.is_null(), file, ": records no inputs it was planned for (written by an older "
           "leanback, or a run's plan from before them)", again);
  const nlohmann::json here = plan_inputs(config, strategy);
  for (const auto& [key, value] : here.items()) {
    // Plans from before the optimizer and accumulation were recorded bound activations only,
    // which neither changes.
    if ((key == "optimizer" || key == "grad_accum") && !plan.profiled_on.contains(key)) continue;
    const nlohmann::json there = plan.profiled_on.value(key, nlohmann::json());
    if (there == value) continue;
    std::string what = key, a = there.dump(), b = value.dump();
    if (value.is_object() && there.is_object())  // name the first differing entry
      for (const auto& [k, v] : value.items())
        if (there.value(k, nlohmann::json()) != v) {
          what += "." + k;
          a = there.value(k, nlohmann::json()).dump();
          b = v.dump();
          break;
        }
    const auto cut = [](std::string x) { return x.size() > 120 ? x.substr(0, 117) + "..." : x; };
    LB_FAIL(file, ": planned for ", what, " ", cut(a), ", this run has ", cut(b), again);
  }
  LB_CHECK(plan.micro_batches == 1 || config.memory.micro_batches, file, ": splits each batch into ",
           plan.micro_batches, " micro-batches, and this run sets memory.micro_batches to false", again);
  const char* plan_key = plan.scope == BudgetScope::Step ? "memory.budget" : "memory.activation_budget";
  LB_CHECK(!config.memory.budget ||
               (config.memory.budget->text == plan.budget_text && config.memory.budget->scope == plan.scope),
           file, ": planned for ", plan_key, " ", plan.budget_text, ", this run asks for ",
           config.memory.budget ? std::string(config.memory.budget->key()) + " " + config.memory.budget->text : "",
           again);
  return plan;
}

Config apply_memory_plan(Config config, const MemoryPlan& plan) {
  if (plan.micro_batches > 1) {
    LB_CHECK(config.data.batch_size % plan.micro_batches == 0, config.source, ": the memory plan splits each batch ",
             "into ", plan.micro_batches, " micro-batches, but data.batch_size is ", config.data.batch_size);
    config.data.batch_size /= plan.micro_batches;
    config.train.grad_accum *= plan.micro_batches;
  }
  config.memory.codecs = plan.section.codecs;
  config.memory.recompute = plan.section.recompute;
  config.memory.recompute_bf16 = plan.section.recompute_bf16;
  if (plan.scope == BudgetScope::Step) {
    config.optimizer.state_bits = plan.levers.state_bits;
    config.optimizer.in_backward = plan.levers.in_backward;
  }
  return with_backward_rules(std::move(config), plan.backward_rules);
}

std::string MemoryPlan::table() const {
  std::ostringstream os;
  const bool whole = scope == BudgetScope::Step;
  os << (whole ? "memory budget " : "activation budget ") << budget_text << ": " << mb(budget_bytes)
     << (whole ? " MB for the whole step" : " MB of activation peak");
  if (budget_text.find('x') != std::string::npos || (!whole && exact_vanilla_peak != exact_peak))
    os << " (the exact vanilla step peaks at " << mb(exact_vanilla_peak) << " MB)";
  if (whole)
    os << "\noptimizer: " << levers.name() << "; besides activations the step holds " << mb(fixed.total())
       << " MB (parameters " << mb(fixed.parameters) << ", buffers " << mb(fixed.buffers) << ", gradients "
       << mb(fixed.gradients) << ", optimizer state " << mb(fixed.optimizer) << "), leaving "
       << mb(activation_budget_bytes) << " MB of activation peak to the plan below";
  const char* step = micro_batches > 1 ? " ms per micro-batch" : " ms per step";
  if (micro_batches > 1)
    os << "\nmicro-batches: " << micro_batches << " per batch, gradients accumulated (no plan fits the batch: it "
       << "needs " << mb(batch_smallest_reachable) << " MB at least); what follows is a micro-batch's";
  const bool batch_norm = profiled_on.is_object() && profiled_on.value("model", nlohmann::json::object()).value(
                                                         "type", std::string()) == "resnet";
  if (micro_batches > 1 && batch_norm)
    os << "\nBatchNorm normalises each micro-batch on its own, as under data-parallel training without "
          "SyncBatchNorm";
  os << "\nexact (nothing planned): activation peak " << mb(exact_peak) << " MB, " << std::fixed << std::setprecision(0)
     << exact_step_ms << step << "\nplanned: " << (whole ? "whole step's peak " : "activation peak ") << mb(predicted_peak) << " MB predicted, " << mb(measured_peak)
     << " MB measured; ~" << predicted_step_ms << step << " predicted; smallest reachable budget "
     << mb(smallest_reachable) << " MB; planned in " << std::setprecision(1) << profile_s << " s"
     << (planner_peak > 0 ? ", holding at most " + mb(planner_peak) + " MB while it profiled" : std::string()) << "\n\n";
  size_t w = 6;
  for (const auto& p : parts) w = std::max(w, p.part.size() + 2);
  os << std::left << std::setw(static_cast<int>(w)) << "part" << std::setw(25) << "keeps" << std::right << std::setw(10)
     << "kept MB" << std::setw(12) << "working MB" << std::setw(8) << "+ms" << "  why\n";
  for (const auto& p : parts)
    os << std::left << std::setw(static_cast<int>(w)) << p.part << std::setw(25) << p.option.name() << std::right
       << std::setw(10) << mb(p.kept_bytes) << std::setw(12) << mb(p.working_bytes) << std::setw(8)
       << std::setprecision(0) << p.added_ms << "  " << p.why << "\n";
  if (!by_length.empty()) {
    os << "\nshorter batches (every sequence at most N tokens; profiled at the batch size x N;\n"
          "  with padding skipped, also batches of at most T real tokens, profiled at the full size with T kept):\n";
    for (const auto& l : by_length)
      os << "  " << (l.max_tokens > 0 ? "T = " + std::to_string(l.max_tokens) : "N = " + std::to_string(l.max_len))
         << ": " << l.summary << "; peak " << mb(l.predicted_peak) << " MB predicted, "
         << (l.measured_peak > 0 ? mb(l.measured_peak) + " MB measured" : std::string("not measured (exact)")) << "; ~"
         << std::setprecision(0) << l.predicted_step_ms << " ms per step"
         << (l.exact_step_ms > 0 && l.summary != "exact"
                 ? " (exact ~" + std::to_string(static_cast<int64_t>(std::lround(l.exact_step_ms))) + ")"
                 : std::string())
         << "\n";
  }
  return os.str();
}

nlohmann::json MemoryPlan::to_json() const {
  nlohmann::json ps = nlohmann::json::array();
  for (const auto& p : parts)
    ps.push_back({{"part", p.part},
                  {"codec", p.option.codec},
                  {"recompute", p.option.recompute},
                  {"bf16_products", p.option.bf16_products},
                  {"strategy", p.option.strategy},
                  {"kept_bytes", p.kept_bytes},
                  {"working_bytes", p.working_bytes},
                  {"added_ms", p.added_ms},
                  {"fidelity", p.fidelity},
                  {"why", p.why}});
  nlohmann::json step = nullptr;
  if (scope == BudgetScope::Step)
    step = {{"state_bits", levers.state_bits}, {"in_backward", levers.in_backward}, {"fixed_bytes", fixed.to_json()},
            {"activation_budget_bytes", activation_budget_bytes}};
  return {{"budget", budget_text},
          {"scope", scope == BudgetScope::Step ? "step" : "activation"},
          {"step", step},
          {"budget_bytes", budget_bytes},
          {"micro_batches", micro_batches},
          {"batch_smallest_reachable_bytes", batch_smallest_reachable},
          {"exact_vanilla_peak_bytes", exact_vanilla_peak},
          {"exact_peak_bytes", exact_peak},
          {"predicted_peak_bytes", predicted_peak},
          {"measured_peak_bytes", measured_peak},
          {"smallest_reachable_bytes", smallest_reachable},
          {"exact_step_ms", exact_step_ms},
          {"predicted_step_ms", predicted_step_ms},
          {"profile_s", profile_s},
          {"planner_peak_bytes", planner_peak},
          {"parts", ps},
          {"memory", section.to_json()},
          {"backward_rules", backward_rules},
          {"profiled_on", profiled_on},
          {"by_length", [&] {
             nlohmann::json a = nlohmann::json::array();
             for (const auto& l : by_length)
               a.push_back({{"max_len", l.max_len},
                            {"max_tokens", l.max_tokens},
                            {"memory", l.section.to_json()},
                            {"predicted_peak_bytes", l.predicted_peak},
                            {"measured_peak_bytes", l.measured_peak},
                            {"predicted_step_ms", l.predicted_step_ms},
                            {"exact_step_ms", l.exact_step_ms},
                            {"summary", l.summary}});
             return a;
           }()}};
}

namespace {
// A plan file's fields, read with every error naming the file and the field's JSON path
// (a hand-edited or damaged plan is named, never a bare JSON library message).
class PlanFields {
 public:
  explicit PlanFields(std::string source) : source_(std::move(source)) {}

  // j[key], which must be there.
  const nlohmann::json& at(const nlohmann::json& j, const std::string& path, const std::string& key) const {
    if (!j.is_object()) fail(path.empty() ? "" : path.substr(0, path.size() - 1), "a JSON object", j);
    if (!j.contains(key)) throw Error(source_ + ": " + path + key + " is missing: not a memory plan leanback wrote");
    return j.at(key);
  }
  // The whole number at j[key] (`fallback` when absent, if given), in [lo, INT64_MAX]: a
  // fraction, a float or a value past int64 is an error, not a truncation or an undefined
  // conversion.
  int64_t integer(const nlohmann::json& j, const std::string& path, const std::string& key, int64_t lo,
                  std::optional<int64_t> fallback = std::nullopt) const {
    if (fallback && j.is_object() && !j.contains(key)) return *fallback;
    const nlohmann::json& v = at(j, path, key);
    const bool fits = v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
    if (!fits || v.get<int64_t>() < lo)
      fail(path + key, "a whole number from " + std::to_string(lo) + " to " + std::to_string(INT64_MAX), v);
    return v.get<int64_t>();
  }
  double number(const nlohmann::json& j, const std::string& path, const std::string& key,
                std::optional<double> fallback = std::nullopt) const {
    if (fallback && j.is_object() && !j.contains(key)) return *fallback;
    const nlohmann::json& v = at(j, path, key);
    if (!v.is_number()) fail(path + key, "a number", v);
    return v.get<double>();
  }
  std::string text(const nlohmann::json& j, const std::string& path, const std::string& key,
                   std::optional<std::string> fallback = std::nullopt) const {
    if (fallback && j.is_object() && !j.contains(key)) return *fallback;
    const nlohmann::json& v = at(j, path, key);
    if (!v.is_string()) fail(path + key, "a string", v);
    return v.get<std::string>();
  }
  bool flag(const nlohmann::json& j, const std::string& path, const std::string& key,
            std::optional<bool> fallback = std::nullopt) const {
    if (fallback && j.is_object() && !j.contains(key)) return *fallback;
    const nlohmann::json& v = at(j, path, key);
    if (!v.is_boolean()) fail(path + key, "true or false", v);
    return v.get<bool>();
  }
  // The list at j[key] (empty when absent and `optional`).
  const nlohmann::json& list(const nlohmann::json& j, const std::string& path, const std::string& key,
                             bool optional = false) const {
    static const nlohmann::json empty = nlohmann::json::array();
    if (optional && j.is_object() && !j.contains(key)) return empty;
    const nlohmann::json& v = at(j, path, key);
    if (!v.is_array()) fail(path + key, "a list", v);
    return v;
  }
  // A section read by another reader (whose errors name its path from `path`): named with the file.
  template <typename F>
  auto section(F&& read) const -> decltype(read()) {
    try {
      return read();
    } catch (const Error& e) {
      throw Error(source_ + ": " + e.what(), e.where());
    }
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& want, const nlohmann::json& got) const {
    std::string g = got.dump();
    if (g.size() > 80) g = g.substr(0, 77) + "...";
    throw Error(source_ + ": " + (path.empty() ? "" : path + ": ") + "expected " + want + ", got " + g);
  }
  std::string source_;
};
}  // namespace

MemoryPlan MemoryPlan::from_json(const nlohmann::json& j, const std::string& source) {
  const PlanFields f(source);
  MemoryPlan p;
  p.budget_text = f.text(j, "", "budget");
  p.budget_bytes = f.integer(j, "", "budget_bytes", 1);
  const std::string scope = f.text(j, "", "scope", "activation");  // plans before it bounded activations
  LB_CHECK(scope == "step" || scope == "activation", source, ": scope: \"step\" or \"activation\", got \"", scope,
           "\"");
  p.scope = scope == "step" ? BudgetScope::Step : BudgetScope::Activation;
  p.activation_budget_bytes = p.budget_bytes;
  if (p.scope == BudgetScope::Step) {
    const nlohmann::json& st = f.at(j, "", "step");
    p.levers.state_bits = f.integer(st, "step.", "state_bits", 4);
    LB_CHECK(p.levers.state_bits == 32 || p.levers.state_bits == 8 || p.levers.state_bits == 4, source,
             ": step.state_bits: 32, 8 or 4, got ", p.levers.state_bits);
    p.levers.in_backward = f.flag(st, "step.", "in_backward");
    p.fixed = f.section([&] { return FixedBytes::from_json(f.at(st, "step.", "fixed_bytes"), "step"); });
    p.activation_budget_bytes = f.integer(st, "step.", "activation_budget_bytes", 0);
  }
  p.micro_batches = f.integer(j, "", "micro_batches", 1, 1);  // plans before them had none
  p.batch_smallest_reachable = f.integer(j, "", "batch_smallest_reachable_bytes", 0, 0);
  p.exact_vanilla_peak = f.integer(j, "", "exact_vanilla_peak_bytes", 0);
  p.exact_peak = f.integer(j, "", "exact_peak_bytes", 0);
  p.predicted_peak = f.integer(j, "", "predicted_peak_bytes", 0);
  p.measured_peak = f.integer(j, "", "measured_peak_bytes", 0);
  p.smallest_reachable = f.integer(j, "", "smallest_reachable_bytes", 0);
  p.exact_step_ms = f.number(j, "", "exact_step_ms");
  p.predicted_step_ms = f.number(j, "", "predicted_step_ms");
  p.profile_s = f.number(j, "", "profile_s");
  if (j.contains("planner_peak_bytes")) p.planner_peak = f.integer(j, "", "planner_peak_bytes", 0);  // older plans: none
  for (const auto& x : f.list(j, "", "parts")) {
    const std::string at = "parts[" + std::to_string(p.parts.size()) + "].";
    PlannedPart part;
    part.part = f.text(x, at, "part");
    part.option.codec = f.text(x, at, "codec");
    part.option.recompute = f.flag(x, at, "recompute");
    part.option.bf16_products = f.flag(x, at, "bf16_products", false);  // plans before it had none
    part.option.strategy = f.text(x, at, "strategy", "");
    part.kept_bytes = f.integer(x, at, "kept_bytes", 0);
    part.working_bytes = f.integer(x, at, "working_bytes", 0);
    part.added_ms = f.number(x, at, "added_ms");
    part.fidelity = f.number(x, at, "fidelity");
    part.why = f.text(x, at, "why");
    p.parts.push_back(part);
  }
  const nlohmann::json& memory = f.at(j, "", "memory");
  p.section = f.section([&] { return MemorySection::from_json(memory, "memory"); });
  p.backward_rules = f.list(j, "", "backward_rules", /*optional=*/true);
  // Checked here as the config checks its own rules, so that an error names this file.
  for (size_t i = 0; i < p.backward_rules.size(); ++i) {
    const std::string at = "backward_rules[" + std::to_string(i) + "].";
    nlohmann::json spec = p.backward_rules[i];
    f.text(spec, at, "match");
    spec.erase("match");
    f.section([&] { return nn::backward::StrategySetting::parse(spec, at.substr(0, at.size() - 1)); });
  }
  p.profiled_on = j.value("profiled_on", nlohmann::json());  // plans before them had none
  for (auto& r : p.section.codecs) r.must_match = false;  // the planner's rules
  for (const auto& x : f.list(j, "", "by_length", /*optional=*/true)) {  // plans before them had none
    const std::string at = "by_length[" + std::to_string(p.by_length.size()) + "].";
    LengthPlan l;
    l.max_len = f.integer(x, at, "max_len", 1);
    l.max_tokens = f.integer(x, at, "max_tokens", 0, 0);  // plans before them had none
    const nlohmann::json& m = f.at(x, at, "memory");
    l.section = f.section([&] { return MemorySection::from_json(m, at + "memory"); });
    for (auto& r : l.section.codecs) r.must_match = false;
    l.predicted_peak = f.integer(x, at, "predicted_peak_bytes", 0);
    l.measured_peak = f.integer(x, at, "measured_peak_bytes", 0);
    l.predicted_step_ms = f.number(x, at, "predicted_step_ms");
    l.exact_step_ms = f.number(x, at, "exact_step_ms", 0.0);  // plans before it had none
    l.summary = f.text(x, at, "summary");
    p.by_length.push_back(l);
  }
  return p;
}


}  // namespace lb::train
