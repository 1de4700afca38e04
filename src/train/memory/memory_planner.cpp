// The memory planner: plans for the largest batch, shorter batches and micro-batches (memory_planner.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
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

namespace {

// The plan for the config's largest batch (see plan_memory), or with `real_tokens` for its
// batches with that many real tokens; HOT is a candidate only where `consider_hot`.
MemoryPlan plan_longest(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                        bool consider_hot, int64_t real_tokens, const PlanWatch& watch) {
  const Config config = worst_case_batch(config_in, real_tokens);
  MemoryProfile p = profile_memory(config, strategy, real_tokens, watch);
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
    if (recomputes) profile_bf16_recompute(p, config, strategy, real_tokens, watch);
  }
  const bool hot = consider_hot && strategies_plannable(config, strategy);
  if (hot && (!choose_memory(p, plan.budget_bytes, weight).feasible || could_pay(p, fidelity_prior({"f32", false, "hot"}), weight)))
    profile_strategy(p, config, strategy, "hot", watch);
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
                      bool shorter_batches, bool consider_hot, const PlanWatch& watch) {
  MemoryPlan plan = plan_longest(config_in, strategy, budget, consider_hot, 0, watch);
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
      watch.check(config_in);
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
        sub = plan_longest(shape, strategy, bytes, /*consider_hot=*/false, tokens, watch);
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
                              bool shorter_batches, const BudgetUnreachable& whole, const PlanWatch& watch) {
  const int64_t batch = config_in.data.batch_size;
  const MemoryBudget bytes = MemoryBudget::parse(std::to_string(whole.budget), "memory.budget");
  std::optional<BudgetUnreachable> last;
  // Each failure's own reach re-estimates k, so few of a large batch's divisors are profiled.
  for (int64_t k = next_micro_batches(batch, 1, whole.needed, whole.budget); k > 0;
       k = next_micro_batches(batch, k, last->needed, whole.budget)) {
    watch.check(config_in);
    Config micro = config_in;
    micro.data.batch_size = batch / k;
    micro.train.grad_accum *= k;
    try {
      MemoryPlan plan = plan_batch(micro, strategy, bytes, shorter_batches, /*consider_hot=*/false, watch);
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

PlanWatch::PlanWatch(StopCheck stop, bool quiet)
    : stop_(std::move(stop)), quiet_(quiet), start_(std::chrono::steady_clock::now()) {}

void PlanWatch::check(const Config& config) const {
  if (stop_ && stop_())
    throw PlanInterrupted(config.source + ": memory.budget: interrupted while planning; nothing was written");
}

void PlanWatch::profiled(const std::string& setting, size_t k, size_t n, const std::string& batch, int64_t peak_bytes,
                         double step_ms) const {
  if (quiet_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << "planning: profiled " << setting << " (" << k << " of " << n
       << ", batch " << batch << "): activation peak " << mb(peak_bytes) << " MB, " << step_ms << " ms per step; "
       << s << " s so far\n";
  std::cerr << line.str() << std::flush;
}

MemoryPlan plan_memory(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                       bool shorter_batches, const StopCheck& stop, bool quiet) {
  const PlanWatch watch(stop, quiet);
  const auto t0 = std::chrono::steady_clock::now();
  MemoryPlan plan;
  try {
    plan = plan_batch(config_in, strategy, budget, shorter_batches, /*consider_hot=*/true, watch);
  } catch (const BudgetUnreachable& e) {
    if (config_in.data.batch_size < 2) throw;
    if (!config_in.memory.micro_batches)
      throw BudgetUnreachable(std::string(e.what()) + "; memory.micro_batches is false: with it the planner " +
                                  "would split the batch into micro-batches whose gradients accumulate",
                              e.needed, e.budget, e.exact_vanilla_peak);
    plan = plan_micro_batches(config_in, strategy, budget, shorter_batches, e, watch);
  }
  plan.profiled_on = plan_inputs(config_in, strategy);
  plan.profile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

}  // namespace lb::train
