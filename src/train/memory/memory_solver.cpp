// The memory planner: the options per block and the choice under a budget (memory_planner.h).
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

}  // namespace lb::train
