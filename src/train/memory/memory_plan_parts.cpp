// The memory planner's shared helpers (see memory_plan_parts.h).
#include "src/train/memory/memory_plan_parts.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "lb/core/error.h"

namespace lb::train::planning {


namespace {
// Recomputation in bf16 on every encoder layer (same probe,
// tools/studies/memory_budget/probe_grid.sh's last vanilla row): g_w 0.99997, g_x 0.99979,
// the bf16 codec's order.
constexpr double kBf16RecomputePrior = 1.2e-4;
}  // namespace

// The codecs' fidelity priors: 1 - the mean of the end-to-end g_w and g_x cosines the
// gradient probe measured with the codec on every kept tensor of the pretrained MiniLM, MRPC,
// 32 x 128 (tools/studies/memory_budget/probe_grid.sh and NOTES.md): bf16 g_w 1.0000, g_x 0.9998;
// int8 g_w 0.9998, g_x 0.9990. int4 (g_w 0.88, one layer's 0.01) is not a candidate. HOT on
// every encoder Linear (same probe, f32): g_w 0.8420, g_x 0.9965; its codecs add their own.
double fidelity_prior(const KeepOption& o) {
  double f = 0;
  if (o.recompute && o.bf16_products) f += kBf16RecomputePrior;
  if (o.codec == "bf16") f += 1e-4;
  if (o.codec == "int8") f += 6e-4;
  if (o.strategy == "hot") f += 0.0808;
  return f;
}

bool under(const std::string& module, const std::string& block) {
  return module == block || (module.size() > block.size() && module.compare(0, block.size() + 1, block + ".") == 0);
}

int64_t bytes_under(const std::vector<autograd::SavedEntry>& entries, const std::string& block) {
  int64_t n = 0;
  for (const auto& e : entries)
    if (under(e.module, block)) n += e.bytes;
  return n;
}

autograd::CodecRule rule(const std::string& match, const std::string& codec) {
  autograd::CodecRule r;
  r.match = match;
  LB_CHECK(autograd::parse_codec(codec, &r.spec.codec), "internal: codec ", codec);
  r.must_match = false;  // a block's tensors may be kept first by the block before it
  return r;
}

// Added time and the fidelity penalty; a thousandth of a millisecond per step away from exact
// breaks ties (a recomputation timed as fast as exact) towards exact, then the earlier option.
double option_cost(const MemoryProfile& p, size_t o, double weight) {
  const double blocks = static_cast<double>(std::max<size_t>(1, p.blocks.size()));
  return p.added_ms[o] + weight * fidelity_prior(p.options[o]) * p.exact_ms / blocks + 1e-3 * static_cast<double>(o);
}

// The backward rules putting `blocks`' layers on `strategy`.
nlohmann::json strategy_rules(const std::vector<std::string>& blocks, const std::string& strategy) {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& b : blocks) rules.push_back({{"match", b + ".*"}, {"type", strategy}});
  return rules;
}

// config with `rules` ahead of its own backward rules.
Config with_backward_rules(Config c, const nlohmann::json& rules) {
  if (rules.empty()) return c;
  nlohmann::json j = c.backward.source_json();
  nlohmann::json all = rules;
  if (j.contains("rules"))
    for (const auto& r : j["rules"]) all.push_back(r);
  j["rules"] = all;
  c.backward = nn::backward::Policy::from_json(j, "backward");
  return c;
}

// HOT is offered where the config leaves every layer's backward as it is by default (vanilla):
// the planner does not overrule strategies a user chose.
bool strategies_plannable(const Config& c, const std::string& strategy) {
  return (strategy.empty() || strategy == "vanilla") && c.backward.source_json().empty();
}

// Whether a strategy whose prior is `prior` could cost less than some profiled option at a
// block: it saves at most the block's whole share of the step, and its penalty is certain.
bool could_pay(const MemoryProfile& p, double prior, double weight) {
  const double share = p.exact_ms / static_cast<double>(std::max<size_t>(1, p.blocks.size()));
  double most = 0;
  for (size_t o = 0; o < p.options.size(); ++o) most = std::max(most, option_cost(p, o, weight));
  return weight * prior * share - share < most;
}

Config with_memory(Config c, const std::vector<autograd::CodecRule>& codecs, std::vector<std::string> recompute,
                   std::vector<std::string> recompute_bf16) {
  c.memory.budget.reset();
  c.memory.codecs = codecs;
  c.memory.recompute = std::move(recompute);
  c.memory.recompute_bf16 = std::move(recompute_bf16);
  return c;
}

Config with_memory(Config c, const MemorySection& m) {
  return with_memory(std::move(c), m.codecs, m.recompute, m.recompute_bf16);
}

// The rules that carry a choice out: per block, one for its own scope and one for its
// submodules, each only where it keeps something (a rule deciding nothing is an error).
MemorySection section_of(const MemoryChoice& s, const MemoryProfile& p) {
  const std::vector<std::string>& blocks = p.blocks;
  MemorySection m;
  const std::string& rest = rest_codecs()[static_cast<size_t>(s.rest)];
  const bool rest_coded = rest != "f32";
  for (size_t b = 0; b < blocks.size(); ++b) {
    const size_t oi = static_cast<size_t>(s.block[b]);
    const KeepOption& o = p.options[oi];
    if (o.codec != "f32" || rest_coded) {  // an exact block under a coded rest says so
      if (p.keeps_own[b][oi]) m.codecs.push_back(rule(blocks[b], o.codec));
      if (p.keeps_inner[b][oi]) m.codecs.push_back(rule(blocks[b] + ".*", o.codec));
    }
    if (o.recompute) (o.bf16_products ? m.recompute_bf16 : m.recompute).push_back(blocks[b]);
  }
  if (rest_coded) m.codecs.push_back(rule("*", rest));
  return m;
}

std::string mb(int64_t bytes) {  // in MB, to 0.1 MB (0.001 MB below 10 MB)
  std::ostringstream os;
  os << std::fixed << std::setprecision(bytes < 10000000 ? 3 : 1) << static_cast<double>(bytes) / 1e6;
  return os.str();
}



}  // namespace lb::train::planning
