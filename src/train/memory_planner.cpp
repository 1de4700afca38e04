// The memory planner (see memory_planner.h).
#include "lb/train/memory_planner.h"

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
#include "lb/train/memory_report.h"
#include "src/backend/kernel_info.h"

namespace lb::train {

namespace {

// Recomputation in bf16 on every encoder layer (same probe, tools/bench/probe_grid.sh's last
// vanilla row): g_w 0.99997, g_x 0.99979, the bf16 codec's order.
constexpr double kBf16RecomputePrior = 1.2e-4;

// The codecs' fidelity priors: 1 - the mean of the end-to-end g_w and g_x cosines the
// gradient probe measured with the codec on every kept tensor of the pretrained MiniLM, MRPC,
// 32 x 128 (tools/bench/probe_grid.sh; tools/bench/README.md): bf16 g_w 1.0000, g_x 0.9998;
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
                   std::vector<std::string> recompute_bf16 = {}) {
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

}  // namespace

std::vector<KeepOption> block_options(const std::string& strategy) {
  std::vector<KeepOption> o;
  for (bool recompute : {false, true})
    for (const char* codec : {"f32", "bf16", "int8"}) o.push_back({codec, recompute, strategy});
  return o;
}
KeepOption bf16_recompute_option() { return {"int8", true, "", true}; }
const std::vector<std::string>& rest_codecs() {
  static const std::vector<std::string> c = {"f32", "bf16", "int8"};
  return c;
}

// The multiple-choice knapsack (memory_planner.h): DP over blocks, state = kept bytes so far
// in units of budget/1024 rounded up.
MemoryChoice choose_memory(const MemoryProfile& p, int64_t budget, double weight) {
  MemoryChoice best;
  const size_t n = p.blocks.size(), m = p.options.size();
  constexpr int64_t kStates = 1024;
  const double unit = std::max(1.0, static_cast<double>(budget) / kStates);
  const auto units = [&](int64_t bytes) { return static_cast<int64_t>(std::ceil(static_cast<double>(bytes) / unit)); };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (size_t ri = 0; ri < rest_codecs().size(); ++ri) {
    const std::string& rest = rest_codecs()[ri];
    const int64_t rest_bytes = p.rest.at(ri);
    const double rest_cost =
        weight * fidelity_prior(KeepOption{rest, false, ""}) * p.exact_ms / static_cast<double>(std::max<size_t>(1, n)) + 1e-3 * static_cast<double>(ri);
    // cost[b][q], the option taken and the worst predicted peak so far
    std::vector<std::vector<double>> cost(n + 1, std::vector<double>(kStates + 1, kInf));
    std::vector<std::vector<int>> took(n + 1, std::vector<int>(kStates + 1, -1));
    std::vector<std::vector<int64_t>> peak(n + 1, std::vector<int64_t>(kStates + 1, 0));
    cost[0][0] = rest_cost;
    for (size_t b = 0; b < n; ++b)
      for (int64_t q = 0; q <= kStates; ++q) {
        if (cost[b][q] == kInf) continue;
        const int64_t prefix = static_cast<int64_t>(static_cast<double>(q) * unit);
        for (size_t o = 0; o < m; ++o) {
          const int64_t at = prefix + p.working[b][o] + p.in_flight[o] + rest_bytes;  // backward reaching b
          if (at > budget) continue;
          const int64_t q2 = q + units(p.kept[b][o]);
          if (q2 > kStates) continue;
          const double c = cost[b][q] + option_cost(p, o, weight);
          if (c < cost[b + 1][q2]) {
            cost[b + 1][q2] = c;
            took[b + 1][q2] = static_cast<int>(o);
            peak[b + 1][q2] = std::max(peak[b][q], at);
          }
        }
      }
    int64_t end = -1;
    for (int64_t q = 0; q <= kStates; ++q)
      if (cost[n][q] < kInf && (end < 0 || cost[n][q] < cost[n][end] - 1e-9)) end = q;
    if (end < 0) continue;
    if (best.feasible && cost[n][end] >= best.cost - 1e-9) continue;
    best.feasible = true;
    best.cost = cost[n][end];
    best.predicted_peak = peak[n][end];
    best.rest = static_cast<int>(ri);
    best.block.assign(n, 0);
    int64_t q = end;
    for (size_t b = n; b > 0; --b) {
      const int o = took[b][q];
      best.block[b - 1] = o;
      q -= units(p.kept[b - 1][static_cast<size_t>(o)]);
    }
    // The peak predicted from the chosen options' bytes: the states round each block's kept
    // bytes up to budget/1024, which for a budget far above the step was most of the "peak"
    // (1078 MB for a 5.9 MB step at 1TiB).
    int64_t prefix = 0;
    best.predicted_peak = 0;
    for (size_t b = 0; b < n; ++b) {
      const auto o = static_cast<size_t>(best.block[b]);
      best.predicted_peak = std::max(best.predicted_peak, prefix + p.working[b][o] + p.in_flight[o] + rest_bytes);
      prefix += p.kept[b][o];
    }
  }
  return best;
}

// Bisection on choose_memory()'s feasibility (monotone in the budget).
int64_t smallest_reachable_budget(const MemoryProfile& p) {
  int64_t lo = 1, hi = 4 * std::max<int64_t>(p.exact_peak, 1);
  if (!choose_memory(p, hi, 0).feasible) return hi;
  while (hi - lo > std::max<int64_t>(hi / 1000, 1)) {
    const int64_t mid = lo + (hi - lo) / 2;
    (choose_memory(p, mid, 0).feasible ? hi : lo) = mid;
  }
  return hi;
}

Config worst_case_batch(Config c, int64_t real_tokens) {
  if (c.model.type == "bert") {
    c.data.padding = "max_length";
    c.model.skip_padding = real_tokens > 0 ? "true" : "false";
  }
  return c;
}

std::string KeepOption::name() const {
  std::string n = strategy.empty() ? "" : strategy;
  const auto add = [&](const std::string& x) { n += (n.empty() ? "" : " + ") + x; };
  if (recompute) add(bf16_products ? "recompute in bf16" : "recompute");
  if (codec != "f32") add(codec);
  return n.empty() ? "exact" : n;
}

namespace {

// by (codec, recompute, bf16 products)
using Reports = std::map<std::tuple<std::string, bool, bool>, MemoryReport>;

// One attributed and two timed steps per option of `options` on `config`.
void stop_if_asked(const StopCheck& stop, const Config& config) {
  if (stop && stop())
    throw PlanInterrupted(config.source + ": memory.budget: interrupted while planning; nothing was written");
}

Reports profile_options(const Config& config, const std::string& strategy, const std::vector<KeepOption>& options,
                        std::vector<std::string>& blocks, int64_t real_tokens, const StopCheck& stop) {
  Reports reports;
  for (const KeepOption& o : options) {
    stop_if_asked(stop, config);
    std::vector<autograd::CodecRule> codecs;
    if (o.codec != "f32") codecs.push_back(rule("*", o.codec));
    if (o.recompute && blocks.empty())
      throw Error(config.source + ": memory.budget: this model has no block that can be recomputed, so the "
                  "planner has nothing to choose from but codecs; give memory.codecs instead");
    const std::vector<std::string> recomputed = o.recompute ? blocks : std::vector<std::string>{};
    MemoryReport r = memory_report(o.bf16_products ? with_memory(config, codecs, {}, recomputed)
                                                   : with_memory(config, codecs, recomputed),
                                   strategy, 2, real_tokens);
    if (blocks.empty()) blocks = r.blocks;
    reports[{o.codec, o.recompute, o.bf16_products}] = std::move(r);
  }
  return reports;
}

// Appends `options`' columns to p (its blocks, exact_ms set) from their reports.
void add_columns(MemoryProfile& p, const std::vector<KeepOption>& options, const Reports& reports) {
  const std::vector<std::string>& blocks = p.blocks;
  const size_t n = blocks.size();
  p.kept.resize(n);
  p.working.resize(n);
  p.keeps_own.resize(n);
  p.keeps_inner.resize(n);
  for (const KeepOption& opt : options) {
    const MemoryReport& r = reports.at({opt.codec, opt.recompute, opt.bf16_products});
    // Recomputation and codecs cannot make a step faster: a negative difference is noise. A
    // strategy's can (HOT's backward is lighter).
    const double added = (r.step_ms - p.exact_ms) / static_cast<double>(std::max<size_t>(1, n));
    p.added_ms.push_back(opt.strategy.empty() ? std::max(0.0, added) : added);
    int64_t kept_at_peak = 0;
    if (r.peak_site)
      for (const auto& e : r.peak_site->kept) kept_at_peak += e.bytes;
    p.in_flight.push_back(std::max<int64_t>(0, r.activation_peak_bytes - kept_at_peak));
    // What the block keeps unrecomputed under the same codec and strategy: from this profile
    // set, or from the columns already in p (recomputation in bf16 is profiled on its own).
    const auto unrecomputed = reports.find({opt.codec, false, false});
    size_t u = p.options.size();
    if (unrecomputed == reports.end()) {
      for (u = 0; u < p.options.size(); ++u)
        if (p.options[u].codec == opt.codec && !p.options[u].recompute && p.options[u].strategy == opt.strategy) break;
      LB_CHECK(u < p.options.size(), "internal: no profile of ", opt.codec, " without recomputation");
    }
    for (size_t b = 0; b < n; ++b) {
      const auto keeps = [&](const MemoryReport& x, bool own) {
        return std::any_of(x.entries.begin(), x.entries.end(), [&](const auto& e) {
          return own ? e.module == blocks[b] : under(e.module, blocks[b]) && e.module != blocks[b];
        });
      };
      p.keeps_own[b].push_back(keeps(r, true));
      // A recomputed block's submodules keep in its recomputation what they keep without it.
      const bool here = unrecomputed != reports.end();
      p.keeps_inner[b].push_back(here ? keeps(unrecomputed->second, false) : p.keeps_inner[b][u]);
      const int64_t kept = bytes_under(r.entries, blocks[b]);
      p.kept[b].push_back(kept);
      // A recomputed block holds its input and, while backward runs through it, its
      // activations made again (kept as the codec keeps them).
      const int64_t again = here ? bytes_under(unrecomputed->second.entries, blocks[b]) : p.kept[b][u];
      p.working[b].push_back(kept + (opt.recompute ? again : 0));
    }
    p.options.push_back(opt);
  }
}

}  // namespace

MemoryProfile profile_memory(const Config& config_in, const std::string& strategy, int64_t real_tokens,
                             const StopCheck& stop) {
  const Config config = worst_case_batch(config_in, real_tokens);
  MemoryProfile p;
  const std::vector<KeepOption> options = block_options();
  const Reports reports = profile_options(config, strategy, options, p.blocks, real_tokens, stop);
  const MemoryReport& exact = reports.at({"f32", false, false});
  p.exact_ms = exact.step_ms;
  p.exact_peak = exact.activation_peak_bytes;
  add_columns(p, options, reports);
  p.rest.assign(rest_codecs().size(), 0);
  for (size_t c = 0; c < rest_codecs().size(); ++c) {
    const MemoryReport& r = reports.at({rest_codecs()[c], false, false});
    int64_t in_blocks = 0;
    for (const auto& b : p.blocks) in_blocks += bytes_under(r.entries, b);
    p.rest[c] = r.saved_bytes - in_blocks;
  }
  return p;
}

bool bf16_recompute_offered(const Config& config) {
  return backend::bf16_products_faster() && config.train.precision == "f32";
}

void profile_bf16_recompute(MemoryProfile& p, const Config& config_in, const std::string& strategy, int64_t real_tokens,
                            const StopCheck& stop) {
  const Config config = worst_case_batch(config_in, real_tokens);
  const std::vector<KeepOption> options = {bf16_recompute_option()};
  std::vector<std::string> blocks = p.blocks;
  add_columns(p, options, profile_options(config, strategy, options, blocks, real_tokens, stop));
}

void profile_strategy(MemoryProfile& p, const Config& config_in, const std::string& strategy,
                      const std::string& candidate, const StopCheck& stop) {
  const Config config = with_backward_rules(worst_case_batch(config_in), strategy_rules(p.blocks, candidate));
  const std::vector<KeepOption> options = block_options(candidate);
  std::vector<std::string> blocks = p.blocks;
  add_columns(p, options, profile_options(config, strategy, options, blocks, 0, stop));
}

namespace {

// The plan for the config's largest batch (see plan_memory), or with `real_tokens` for its
// batches with that many real tokens; HOT is a candidate only where `consider_hot`.
MemoryPlan plan_longest(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                        bool consider_hot, int64_t real_tokens, const StopCheck& stop) {
  const Config config = worst_case_batch(config_in, real_tokens);
  MemoryProfile p = profile_memory(config, strategy, real_tokens, stop);
  const std::vector<std::string>& blocks = p.blocks;
  const size_t n = blocks.size();
  MemoryPlan plan;
  plan.budget_text = budget.text;
  plan.exact_peak = p.exact_peak;
  plan.exact_step_ms = p.exact_ms;
  plan.exact_vanilla_peak = p.exact_peak;
  // A fraction refers to the exact vanilla step: measured apart unless that is what ran.
  const bool vanilla = strategy == "vanilla" || (strategy.empty() && config.backward.source_json().empty());
  if (budget.is_fraction() && !vanilla)
    plan.exact_vanilla_peak = memory_report(with_memory(config, {}, {}), "vanilla", 0, real_tokens).activation_peak_bytes;
  plan.budget_bytes = budget.resolve(plan.exact_vanilla_peak);
  const double weight = config.memory.fidelity_weight;
  // Recomputation in bf16 where the plan recomputes (or nothing fits) and the CPU gains by it.
  if (bf16_recompute_offered(config)) {
    const MemoryChoice first = choose_memory(p, plan.budget_bytes, weight);
    const bool recomputes = !first.feasible || std::any_of(first.block.begin(), first.block.end(), [&](int o) {
      return p.options[static_cast<size_t>(o)].recompute;
    });
    if (recomputes) profile_bf16_recompute(p, config, strategy, real_tokens, stop);
  }
  const bool hot = consider_hot && strategies_plannable(config, strategy);
  if (hot && (!choose_memory(p, plan.budget_bytes, weight).feasible || could_pay(p, fidelity_prior({"f32", false, "hot"}), weight)))
    profile_strategy(p, config, strategy, "hot", stop);
  plan.smallest_reachable = smallest_reachable_budget(p);
  const auto describe_budget = [&] {
    return "memory.budget " + budget.text + " (" + mb(plan.budget_bytes) + " MB of activation peak" +
           (budget.is_fraction() ? ", of the exact vanilla step's " + mb(plan.exact_vanilla_peak) + " MB" : "") + ")";
  };
  int64_t target = plan.budget_bytes;
  for (int attempt = 0;; ++attempt) {
    const MemoryChoice s = choose_memory(p, target, weight);
    if (!s.feasible && attempt > 0)
      throw BudgetUnreachable(
          config.source + ": " + describe_budget() + ": the best plan's measured activation peak is " +
              mb(plan.measured_peak) + " MB (predicted " + mb(plan.predicted_peak) + " MB), and leaner plans " +
              "are predicted not to reach the budget either (smallest reachable: " + mb(plan.smallest_reachable) +
              " MB, predicted). Raise the budget to " + mb(plan.measured_peak) + " MB or more",
          plan.measured_peak, plan.budget_bytes, plan.exact_vanilla_peak);
    if (!s.feasible)
      throw BudgetUnreachable(
          config.source + ": " + describe_budget() + " is below the smallest reachable for this model, " +
              "batch and backward strategies: " + mb(plan.smallest_reachable) + " MB (predicted; with every " +
              "block recomputed and kept in int8 where that is least" +
              (hot ? ", its layers on HOT where that keeps less" : "") +
              "). Raise the budget or lower data.batch_size / data.max_seq_len",
          plan.smallest_reachable, plan.budget_bytes, plan.exact_vanilla_peak);
    plan.section = section_of(s, p);
    std::vector<std::string> hot_blocks;
    for (size_t b = 0; b < n; ++b)
      if (p.options[static_cast<size_t>(s.block[b])].strategy == "hot") hot_blocks.push_back(blocks[b]);
    plan.backward_rules = strategy_rules(hot_blocks, "hot");
    plan.predicted_peak = s.predicted_peak;
    const MemoryReport measured = memory_report(
        with_backward_rules(with_memory(config, plan.section), plan.backward_rules), strategy,
        0, real_tokens);
    plan.measured_peak = measured.activation_peak_bytes;
    plan.parts.clear();
    double ms = p.exact_ms;
    for (size_t b = 0; b < n; ++b) {
      const size_t o = static_cast<size_t>(s.block[b]);
      PlannedPart part;
      part.part = blocks[b];
      part.option = p.options[o];
      part.kept_bytes = p.kept[b][o];
      part.working_bytes = p.working[b][o];
      part.added_ms = p.added_ms[o];
      part.fidelity = fidelity_prior(part.option);
      part.why = o == 0 ? "exact fits"
                        : "least cost that fits (" + std::string(p.added_ms[o] < 0 ? "" : "+") +
                              std::to_string(static_cast<int>(std::lround(p.added_ms[o]))) + " ms" +
                              (part.fidelity > 0 ? ", lossy" : ", exact") + ")";
      ms += part.added_ms;
      plan.parts.push_back(part);
    }
    PlannedPart rest;
    rest.part = "(rest)";
    rest.option.codec = rest_codecs()[static_cast<size_t>(s.rest)];
    rest.kept_bytes = rest.working_bytes = p.rest.at(static_cast<size_t>(s.rest));
    rest.fidelity = fidelity_prior(rest.option);
    rest.why = s.rest == 0 ? "exact fits" : "least cost that fits (lossy)";
    plan.parts.push_back(rest);
    plan.predicted_step_ms = ms;
    if (plan.measured_peak <= plan.budget_bytes) break;
    const int64_t over = plan.measured_peak - plan.budget_bytes;
    // Solve again with the excess taken off, but never below the leanest plan the model
    // predicts: that one is the last to try (an excess larger than the room left would
    // otherwise end the search before it).
    const int64_t next = std::max(target - over - (1 << 20), plan.smallest_reachable);
    if (attempt == 3 || next >= target)
      throw BudgetUnreachable(
          config.source + ": " + describe_budget() + ": the plan's measured activation peak is " +
              mb(plan.measured_peak) + " MB (predicted " + mb(plan.predicted_peak) + " MB)" +
              (measured.peak_site ? ", set in " + measured.peak_site->phase + " of " + measured.peak_site->op +
                                        " in " + measured.peak_site->module
                                  : std::string()) +
              "; the planner could not fit it, not even with its leanest plan. Raise the budget to " +
              mb(plan.measured_peak) + " MB or more",
          plan.measured_peak, plan.budget_bytes, plan.exact_vanilla_peak);
    target = next;
  }
  return plan;
}

// Shorter sequence lengths worth a plan of their own: 3/4, 1/2 and 1/4 of max_seq_len,
// rounded up to a multiple of 8, longest first.
std::vector<int64_t> shorter_lengths(int64_t max_len) {
  std::vector<int64_t> out;
  for (int64_t quarters : {3, 2, 1}) {
    const int64_t len = std::max<int64_t>(8, (max_len * quarters / 4 + 7) / 8 * 8);
    if (len < max_len && (out.empty() || len < out.back())) out.push_back(len);
  }
  return out;
}

// Numbers of real tokens worth a plan of their own where padding is skipped: 3/4, 1/2 and
// 1/4 of a full batch's, most first.
std::vector<int64_t> fewer_tokens(int64_t batch, int64_t max_len) {
  std::vector<int64_t> out;
  for (int64_t quarters : {3, 2, 1}) {
    const int64_t tokens = batch * max_len * quarters / 4;
    if (tokens >= batch && (out.empty() || tokens < out.back())) out.push_back(tokens);
  }
  return out;
}

// The plan for the config's batch as it is (see plan_memory): its largest batch, then,
// for BERT, shorter ones.
MemoryPlan plan_batch(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                      bool shorter_batches, bool consider_hot, const StopCheck& stop) {
  MemoryPlan plan = plan_longest(config_in, strategy, budget, consider_hot, 0, stop);
  // Shorter batches, BERT: a plan per shorter length for the same bytes, longest first, until
  // one runs exact (shorter ones then do too); where padding is skipped, the same per number
  // of real tokens. Where the longest batch needs HOT the plans would differ in backward
  // strategies as well; those runs keep one plan.
  const bool compresses =
      !plan.section.codecs.empty() || !plan.section.recompute.empty() || !plan.section.recompute_bf16.empty();
  if (shorter_batches && config_in.model.type == "bert" && compresses && plan.backward_rules.empty()) {
    const MemoryBudget bytes = MemoryBudget::parse(std::to_string(plan.budget_bytes), "memory.budget");
    // The plan for batches of `shape`'s max_seq_len (and `tokens` real tokens, if > 0);
    // true where it runs exact.
    const auto plan_shape = [&](const Config& shape, int64_t tokens) {
      stop_if_asked(stop, config_in);
      LengthPlan lp;
      lp.max_len = shape.data.max_seq_len;
      lp.max_tokens = tokens;
      const MemoryReport exact =
          memory_report(with_memory(worst_case_batch(shape, tokens), {}, {}), strategy, 2, tokens);
      if (exact.activation_peak_bytes <= plan.budget_bytes) {
        lp.predicted_peak = lp.measured_peak = exact.activation_peak_bytes;
        lp.predicted_step_ms = lp.exact_step_ms = exact.step_ms;
        lp.summary = "exact";
        plan.by_length.push_back(lp);
        return true;
      }
      MemoryPlan sub;
      try {
        sub = plan_longest(shape, strategy, bytes, /*consider_hot=*/false, tokens, stop);
      } catch (const PlanInterrupted&) {
        throw;
      } catch (const Error&) {
        return false;  // such batches keep the plan of a larger shape
      }
      lp.section = sub.section;
      lp.predicted_peak = sub.predicted_peak;
      lp.measured_peak = sub.measured_peak;
      lp.predicted_step_ms = sub.predicted_step_ms;
      lp.exact_step_ms = sub.exact_step_ms;
      lp.summary = sub.summary();
      plan.by_length.push_back(lp);
      return false;
    };
    for (const int64_t len : shorter_lengths(config_in.data.max_seq_len)) {
      Config shorter = config_in;
      shorter.data.max_seq_len = len;
      if (plan_shape(shorter, 0)) break;
    }
    if (config_in.model.skip_padding != "false")
      for (const int64_t tokens : fewer_tokens(config_in.data.batch_size, config_in.data.max_seq_len))
        if (plan_shape(config_in, tokens)) break;
  }
  return plan;
}

// Micro-batches for a batch no plan fits (`whole`: why; see memory_planner.h): the first k
// that fits, of B's divisors from whole.needed / whole.budget on, micro-batch 1 last.
MemoryPlan plan_micro_batches(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                              bool shorter_batches, const BudgetUnreachable& whole, const StopCheck& stop) {
  const int64_t batch = config_in.data.batch_size;
  const MemoryBudget bytes = MemoryBudget::parse(std::to_string(whole.budget), "memory.budget");
  std::optional<BudgetUnreachable> last;
  // Each failure's own reach re-estimates k, so few of a large batch's divisors are profiled.
  for (int64_t k = next_micro_batches(batch, 1, whole.needed, whole.budget); k > 0;
       k = next_micro_batches(batch, k, last->needed, whole.budget)) {
    stop_if_asked(stop, config_in);
    Config micro = config_in;
    micro.data.batch_size = batch / k;
    micro.train.grad_accum *= k;
    try {
      MemoryPlan plan = plan_batch(micro, strategy, bytes, shorter_batches, /*consider_hot=*/false, stop);
      plan.micro_batches = k;
      plan.batch_smallest_reachable = whole.needed;
      plan.budget_text = budget.text;
      plan.exact_vanilla_peak = whole.exact_vanilla_peak;
      return plan;
    } catch (const BudgetUnreachable& e) {
      last.emplace(e);
    }
  }
  const std::string what = budget.text + " (" + mb(whole.budget) + " MB of activation peak)";
  throw BudgetUnreachable(config_in.source + ": memory.budget " + what + " is below the smallest reachable even in " +
                              "micro-batches of one example: " + mb(last ? last->needed : whole.needed) +
                              " MB (the batch of " + std::to_string(batch) + ": " + mb(whole.needed) +
                              " MB). Raise the budget or lower data.max_seq_len",
                          last ? last->needed : whole.needed, whole.budget, whole.exact_vanilla_peak);
}

}  // namespace

int64_t next_micro_batches(int64_t batch, int64_t k_failed, int64_t needed, int64_t budget) {
  const double scaled = static_cast<double>(k_failed) * static_cast<double>(needed) /
                        static_cast<double>(std::max<int64_t>(1, budget));
  if (k_failed >= batch) return 0;
  if (scaled >= static_cast<double>(batch)) return batch;
  const int64_t at_least = std::max(k_failed + 1, static_cast<int64_t>(std::ceil(scaled)));
  for (int64_t k = at_least; k < batch; ++k)
    if (batch % k == 0) return k;
  return batch;
}

MemoryPlan plan_memory(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                       bool shorter_batches, const StopCheck& stop) {
  const auto t0 = std::chrono::steady_clock::now();
  MemoryPlan plan;
  try {
    plan = plan_batch(config_in, strategy, budget, shorter_batches, /*consider_hot=*/true, stop);
  } catch (const BudgetUnreachable& e) {
    if (config_in.data.batch_size < 2) throw;
    if (!config_in.memory.micro_batches)
      throw BudgetUnreachable(std::string(e.what()) + "; memory.micro_batches is false: with it the planner " +
                                  "would split the batch into micro-batches whose gradients accumulate",
                              e.needed, e.budget, e.exact_vanilla_peak);
    plan = plan_micro_batches(config_in, strategy, budget, shorter_batches, e, stop);
  }
  plan.profiled_on = plan_inputs(config_in, strategy);
  plan.profile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

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
                       {"precision", config.train.precision}};
  const nlohmann::json& d = c.at("data");
  for (const char* k : {"task", "batch_size", "max_seq_len", "padding", "vocab"})
    in["data"][k] = d.value(k, nlohmann::json());
  return in;
}

MemoryPlan load_memory_plan(const std::string& file, const Config& config, const std::string& strategy) {
  MemoryPlan plan = MemoryPlan::from_json(io::read_json_file(file), file);
  const std::string again = "; make one for this run: leanback plan " + config.source + " --memory-budget " +
                            (config.memory.budget ? config.memory.budget->text : plan.budget_text) + " --json > FILE";
  LB_CHECK(!plan.profiled_on.is_null(), file, ": records no inputs it was planned for (written by an older "
           "leanback, or a run's plan from before them)", again);
  const nlohmann::json here = plan_inputs(config, strategy);
  for (const auto& [key, value] : here.items()) {
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
  LB_CHECK(!config.memory.budget || config.memory.budget->text == plan.budget_text, file, ": planned for memory.budget ",
           plan.budget_text, ", this run asks for ", config.memory.budget ? config.memory.budget->text : "", again);
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
  return with_backward_rules(std::move(config), plan.backward_rules);
}

std::string MemoryPlan::table() const {
  std::ostringstream os;
  os << "memory budget " << budget_text << ": " << mb(budget_bytes) << " MB of activation peak";
  if (exact_vanilla_peak != exact_peak || budget_text.find('x') != std::string::npos)
    os << " (the exact vanilla step peaks at " << mb(exact_vanilla_peak) << " MB)";
  const char* step = micro_batches > 1 ? " ms per micro-batch" : " ms per step";
  if (micro_batches > 1)
    os << "\nmicro-batches: " << micro_batches << " per batch, gradients accumulated (no plan fits the batch: it "
       << "needs " << mb(batch_smallest_reachable) << " MB at least); what follows is a micro-batch's";
  const bool batch_norm = profiled_on.is_object() && profiled_on.value("model", nlohmann::json::object()).value(
                                                         "type", std::string()) == "resnet";
  if (micro_batches > 1 && batch_norm)
    os << "\nBatchNorm normalises each micro-batch on its own, as under data-parallel training without "
          "SyncBatchNorm";
  os << "\nexact (nothing planned): peak " << mb(exact_peak) << " MB, " << std::fixed << std::setprecision(0)
     << exact_step_ms << step << "\nplanned: peak " << mb(predicted_peak) << " MB predicted, " << mb(measured_peak)
     << " MB measured; ~" << predicted_step_ms << step << " predicted; smallest reachable budget "
     << mb(smallest_reachable) << " MB; planned in " << std::setprecision(1) << profile_s << " s\n\n";
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
         << mb(l.measured_peak) << " MB measured; ~" << std::setprecision(0) << l.predicted_step_ms << " ms per step"
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
  return {{"budget", budget_text},
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
