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
#include "src/train/memory/scaled_report.h"
#include "src/train/memory/step_levers.h"

namespace lb::train {

using namespace planning;  // NOLINT: the parts' shared helpers (memory_plan_parts.h)

namespace {

// A size below what the leanest optimizer setting holds besides activations: an error before
// any profiling.
// The optimizer setting that holds least besides activations, and what it holds.
const LeverOption& leanest(const std::vector<LeverOption>& levers) {
  return *std::min_element(levers.begin(), levers.end(),
                           [](const LeverOption& a, const LeverOption& b) { return a.fixed.total() < b.fixed.total(); });
}
int64_t least_fixed_bytes(const std::vector<LeverOption>& levers) { return leanest(levers).fixed.total(); }

void check_state_fits(const Config& config, const MemoryBudget& budget, const std::vector<LeverOption>& levers) {
  const int64_t bytes = budget.resolve(0);
  const int64_t least = least_fixed_bytes(levers);
  if (least >= bytes)
    throw BudgetUnreachable(config.source + ": " + budget.key() + " " + budget.text + " (" + mb(bytes) +
                                " MB of whole step) is below what the step holds besides activations with the " +
                                "leanest optimizer settings: " + mb(least) + " MB of parameters, gradients and " +
                                "optimizer state. Raise the budget",
                            least, bytes, 0, least);
}

// The optimizer setting whose cost and that of the activation plan fitting what it leaves of
// `budget` are least (none: no setting leaves enough).
std::optional<size_t> cheapest_levers(const MemoryProfile& p, const std::vector<LeverOption>& levers, int64_t budget,
                                      double weight) {
  std::optional<size_t> lever;
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < levers.size(); ++i) {
    const MemoryChoice c = choose_memory(p, budget - levers[i].fixed.total(), weight);
    const double cost = c.cost + lever_cost(levers[i], p.exact_ms, weight);
    if (c.feasible && cost < best) best = cost, lever = i;
  }
  return lever;
}

// The options profiled where the six do not settle it, for `act_budget` bytes of activations:
// recomputation in bf16 where the plan recomputes (or nothing fits) and the CPU gains by it
// (untimed where `timed_by` has it); HOT where `hot` and it could pay, or only to reach the
// budget: its leanest settings first, the rest where they lower the floor.
void profile_more_options(MemoryProfile& p, const Config& profiled, const std::string& strategy, int64_t real_tokens,
                          int64_t act_budget, bool hot, const MemoryProfile* timed_by, const PlanWatch& watch) {
  const double weight = profiled.memory.fidelity_weight;
  if (bf16_recompute_offered(profiled)) {
    const MemoryChoice first = choose_memory(p, act_budget, weight);
    const bool recomputes = !first.feasible || std::any_of(first.block.begin(), first.block.end(), [&](int o) {
      return p.options[static_cast<size_t>(o)].recompute;
    });
    if (recomputes) {
      const bool has = timed_by && std::any_of(timed_by->options.begin(), timed_by->options.end(), [](const KeepOption& o) {
                         return o.name() == bf16_recompute_option().name();
                       });
      profile_bf16_recompute(p, profiled, strategy, real_tokens, watch, has ? 0 : 2);
      if (has) retime(p, *timed_by);
    }
  }
  if (hot && could_pay(p, fidelity_prior({"f32", false, "hot"}), weight)) {
    profile_strategy(p, profiled, strategy, "hot", watch);
  } else if (hot && !choose_memory(p, act_budget, weight).feasible) {
    const int64_t floor = smallest_reachable_budget(p);
    profile_strategy(p, profiled, strategy, "hot", watch, StrategyColumns::Leanest);
    if (smallest_reachable_budget(p) < floor)
      profile_strategy(p, profiled, strategy, "hot", watch, StrategyColumns::Rest);
  }
}

// The plan for the config's largest batch (see plan_memory), or with `real_tokens` for its
// batches with that many real tokens; HOT is a candidate only where `consider_hot`.
// `times`: where it holds a profile (the longest batch's), this plan's options are profiled
// untimed and take their times from it (retime); where it is empty, it gets this plan's.
MemoryPlan plan_longest(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                        bool consider_hot, int64_t real_tokens, const PlanWatch& watch, bool data_parallel,
                        MemoryProfile* times = nullptr) {
  const Config config = worst_case_batch(config_in, real_tokens);
  const bool whole = budget.whole_step();
  // The whole step: what each optimizer setting holds besides activations, measured first.
  const int64_t known_bytes = budget.is_fraction() ? 0 : budget.resolve(0);
  const std::vector<LeverOption> levers =
      whole ? measure_levers(config, strategy, data_parallel, known_bytes, watch) : std::vector<LeverOption>{};
  if (whole && !budget.is_fraction()) check_state_fits(config, budget, levers);
  // Under memory.budget the options are profiled with the leanest optimizer setting, so that
  // profiling holds no more than a plan may (what activations keep does not depend on it).
  const Config profiled = whole ? with_levers(config, leanest(levers).levers) : config;
  const MemoryProfile* timed_by = times && !times->options.empty() ? times : nullptr;
  MemoryProfile p = profile_memory(profiled, strategy, real_tokens, watch, timed_by ? 0 : 2);
  if (timed_by) retime(p, *timed_by);
  const std::vector<std::string>& blocks = p.blocks;
  const size_t n = blocks.size();
  MemoryPlan plan;
  plan.budget_text = budget.text;
  plan.scope = budget.scope;
  plan.exact_peak = p.exact_peak;
  plan.exact_step_ms = p.exact_ms;
  plan.exact_vanilla_peak = p.exact_peak;
  // A fraction refers to the exact vanilla step: measured apart unless that is what ran (the
  // whole step: a step once the optimizer holds its state).
  const bool vanilla = strategy == "vanilla" || (strategy.empty() && config.backward.source_json().empty());
  if (budget.is_fraction()) {  // the one full-batch step of the exact run the planner takes
    const MemoryReport exact =
        whole ? memory_report(with_memory(config, {}, {}), vanilla ? strategy : "vanilla", 0, real_tokens, true)
              : memory_report(with_memory(config, {}, {}), "vanilla", 0, real_tokens);
    watch.held(exact.run_peak_bytes);
    if (whole) plan.exact_vanilla_peak = exact.steady_peak_bytes;
    else if (!vanilla) plan.exact_vanilla_peak = exact.activation_peak_bytes;
  }
  plan.budget_bytes = budget.resolve(plan.exact_vanilla_peak);
  const double weight = config.memory.fidelity_weight;
  // The most activation bytes any optimizer setting leaves, for the choices below.
  const int64_t least_fixed = whole ? least_fixed_bytes(levers) : 0;
  const int64_t act_budget = plan.budget_bytes - least_fixed;
  const bool hot = consider_hot && strategies_plannable(config, strategy);
  profile_more_options(p, profiled, strategy, real_tokens, act_budget, hot, timed_by, watch);
  if (times && !timed_by) *times = p;
  const int64_t act_floor = smallest_reachable_budget(p);
  plan.smallest_reachable = act_floor + least_fixed;
  const auto describe_budget = [&] {
    return std::string(budget.key()) + " " + budget.text + " (" + mb(plan.budget_bytes) + " MB of " + budget.bounds() +
           (budget.is_fraction() ? ", of the exact vanilla step's " + mb(plan.exact_vanilla_peak) + " MB" : "") + ")";
  };
  // The levers: the least total cost of theirs and the activation plan that fits what they leave.
  if (whole) {
    const std::optional<size_t> lever = cheapest_levers(p, levers, plan.budget_bytes, weight);
    if (!lever)
      throw BudgetUnreachable(
          config.source + ": " + describe_budget() + " is below the smallest reachable whole step for this " +
              "model, batch and backward strategies: " + mb(plan.smallest_reachable) + " MB (predicted: " +
              mb(least_fixed) + " MB of parameters, gradients and optimizer state with the leanest optimizer " +
              "settings, and " + mb(act_floor) + " MB of activations with every block recomputed and kept in int8 " +
              "where that is least). Raise the budget or lower data.batch_size / data.max_seq_len",
          plan.smallest_reachable, plan.budget_bytes, plan.exact_vanilla_peak, least_fixed);
    plan.levers = levers[*lever].levers;
    plan.fixed = levers[*lever].fixed;
  }
  const int64_t fixed = whole ? plan.fixed.total() : 0;
  int64_t target = plan.budget_bytes - fixed;
  for (int attempt = 0;; ++attempt) {
    const MemoryChoice s = choose_memory(p, target, weight);
    if (!s.feasible && attempt > 0)
      throw BudgetUnreachable(
          config.source + ": " + describe_budget() + ": the best plan's measured peak is " +
              mb(plan.measured_peak) + " MB (predicted " + mb(plan.predicted_peak) + " MB), and leaner plans " +
              "are predicted not to reach the budget either (smallest reachable: " + mb(plan.smallest_reachable) +
              " MB, predicted). Raise the budget to " + mb(plan.measured_peak) + " MB or more",
          plan.measured_peak, plan.budget_bytes, plan.exact_vanilla_peak, least_fixed);
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
    plan.activation_budget_bytes = target;
    plan.predicted_peak = s.predicted_peak + fixed;
    Config planned = with_backward_rules(with_memory(config, plan.section), plan.backward_rules);
    if (whole) planned = with_levers(planned, plan.levers);
    const MemoryReport measured = memory_report(planned, strategy, 0, real_tokens, /*steady_step=*/whole);
    watch.held(measured.run_peak_bytes);
    plan.measured_peak = whole ? measured.steady_peak_bytes : measured.activation_peak_bytes;
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
    const int64_t next = std::max(target - over - (1 << 20), act_floor);
    if (attempt == 3 || next >= target)
      throw BudgetUnreachable(
          config.source + ": " + describe_budget() + ": the plan's measured peak is " +
              mb(plan.measured_peak) + " MB (predicted " + mb(plan.predicted_peak) + " MB)" +
              (measured.peak_site ? ", set in " + measured.peak_site->phase + " of " + measured.peak_site->op +
                                        " in " + measured.peak_site->module
                                  : std::string()) +
              "; the planner could not fit it, not even with its leanest plan. Raise the budget to " +
              mb(plan.measured_peak) + " MB or more",
          plan.measured_peak, plan.budget_bytes, plan.exact_vanilla_peak, least_fixed);
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
                      bool shorter_batches, bool consider_hot, const PlanWatch& watch, bool data_parallel) {
  MemoryProfile times;  // the longest batch's, whose times the shorter batches' plans take
  MemoryPlan plan = plan_longest(config_in, strategy, budget, consider_hot, 0, watch, data_parallel, &times);
  // Shorter batches, BERT: a plan per shorter length for the same bytes, longest first, until
  // one runs exact (shorter ones then do too); where padding is skipped, the same per number
  // of real tokens. Where the longest batch needs HOT the plans would differ in backward
  // strategies as well; those runs keep one plan. Under memory.budget the optimizer settings
  // are the run's, so shorter batches are planned with them for the activation bytes they leave.
  const bool compresses =
      !plan.section.codecs.empty() || !plan.section.recompute.empty() || !plan.section.recompute_bf16.empty();
  if (shorter_batches && config_in.model.type == "bert" && compresses && plan.backward_rules.empty()) {
    const MemoryBudget bytes = MemoryBudget::of_bytes(plan.activation_budget_bytes, BudgetScope::Activation);
    const Config run = budget.whole_step() ? with_levers(config_in, plan.levers) : config_in;
    // The plan for batches of `shape`'s max_seq_len (and `tokens` real tokens, if > 0);
    // true where it runs exact.
    const auto plan_shape = [&](const Config& shape, int64_t tokens) {
      watch.check(config_in);
      LengthPlan lp;
      lp.max_len = shape.data.max_seq_len;
      lp.max_tokens = tokens;
      const MemoryReport exact =
          scaled_memory_report(with_memory(worst_case_batch(shape, tokens), {}, {}), strategy, 0, tokens);
      watch.held(exact.run_peak_bytes);
      if (exact.activation_peak_bytes <= plan.activation_budget_bytes) {
        const double shape_tokens =
            static_cast<double>(tokens > 0 ? tokens : shape.data.batch_size * shape.data.max_seq_len);
        lp.predicted_peak = exact.activation_peak_bytes;
        // Profiled on two small batches, an upper bound: no step of this shape was measured.
        lp.measured_peak = profile_batches(shape).scaled() ? 0 : exact.activation_peak_bytes;
        lp.predicted_step_ms = lp.exact_step_ms = times.exact_ms * shape_tokens / std::max(1.0, times.tokens);
        lp.summary = "exact";
        plan.by_length.push_back(lp);
        return true;
      }
      MemoryPlan sub;
      try {
        sub = plan_longest(shape, strategy, bytes, /*consider_hot=*/false, tokens, watch, data_parallel, &times);
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
      Config shorter = run;
      shorter.data.max_seq_len = len;
      if (plan_shape(shorter, 0)) break;
    }
    if (config_in.model.skip_padding != "false")
      for (const int64_t tokens : fewer_tokens(config_in.data.batch_size, config_in.data.max_seq_len))
        if (plan_shape(run, tokens)) break;
  }
  return plan;
}

// Micro-batches for a batch no plan fits (`whole`: why; see memory_planner.h): the first k
// that fits, of B's divisors from whole.needed / whole.budget on, micro-batch 1 last.
MemoryPlan plan_micro_batches(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                              bool shorter_batches, const BudgetUnreachable& whole, const PlanWatch& watch,
                              bool data_parallel) {
  const int64_t batch = config_in.data.batch_size;
  MemoryBudget bytes = MemoryBudget::of_bytes(whole.budget, budget.scope);
  bytes.text = budget.text;  // errors name the budget as the user wrote it
  // Under memory.budget what the step holds besides activations does not shrink with the
  // micro-batch: only the rest scales.
  if (whole.fixed >= whole.budget)
    throw BudgetUnreachable(std::string(whole.what()) + "; micro-batches would not help: the parameters, gradients " +
                                "and optimizer state alone take " + mb(whole.fixed) + " MB",
                            whole.needed, whole.budget, whole.exact_vanilla_peak, whole.fixed);
  const auto next = [&](int64_t k, int64_t needed, int64_t fixed) {
    return next_micro_batches(batch, k, needed - fixed, whole.budget - fixed);
  };
  std::optional<BudgetUnreachable> last;
  // Each failure's own reach re-estimates k, so few of a large batch's divisors are profiled.
  for (int64_t k = next(1, whole.needed, whole.fixed); k > 0;
       k = next(k, last->needed, last->fixed)) {
    watch.check(config_in);
    Config micro = config_in;
    micro.data.batch_size = batch / k;
    micro.train.grad_accum *= k;
    try {
      MemoryPlan plan = plan_batch(micro, strategy, bytes, shorter_batches, /*consider_hot=*/false, watch, data_parallel);
      plan.micro_batches = k;
      plan.batch_smallest_reachable = whole.needed;
      plan.budget_text = budget.text;
      plan.exact_vanilla_peak = whole.exact_vanilla_peak;
      return plan;
    } catch (const BudgetUnreachable& e) {
      // Accumulated gradients stay whole between micro-batches: where the step's state alone
      // is over the budget, smaller micro-batches cannot help either.
      if (e.fixed >= whole.budget)
        throw BudgetUnreachable(std::string(e.what()) + "; in micro-batches of " + std::to_string(batch / k) +
                                    " the parameters, accumulated gradients and optimizer state alone take " +
                                    mb(e.fixed) + " MB, so smaller ones do not help (the whole batch of " +
                                    std::to_string(batch) + " needs " + mb(whole.needed) + " MB at least)",
                                e.needed, e.budget, e.exact_vanilla_peak, e.fixed);
      last.emplace(e);
    }
  }
  const std::string what = budget.text + " (" + mb(whole.budget) + " MB of " + budget.bounds() + ")";
  throw BudgetUnreachable(config_in.source + ": " + budget.key() + " " + what + " is below the smallest reachable even in " +
                              "micro-batches of one example: " + mb(last ? last->needed : whole.needed) +
                              " MB (the batch of " + std::to_string(batch) + ": " + mb(whole.needed) +
                              " MB). Raise the budget or lower data.max_seq_len",
                          last ? last->needed : whole.needed, whole.budget, whole.exact_vanilla_peak, whole.fixed);
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
    throw PlanInterrupted(config.source + ": " + (config.memory.budget ? config.memory.budget->key() : "memory.budget") +
                          ": interrupted while planning; nothing was written");
}

void PlanWatch::profiled(const std::string& setting, size_t k, size_t n, const std::string& batch, int64_t peak_bytes,
                         double step_ms, const char* what) const {
  if (quiet_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << "planning: profiled " << setting << " (" << k << " of " << n
       << ", batch " << batch << "): " << what << " " << mb(peak_bytes) << " MB"
       << (step_ms > 0 ? ", " + std::to_string(static_cast<int64_t>(std::lround(step_ms))) + " ms per step" : "")
       << "; " << s << " s so far\n";
  std::cerr << line.str() << std::flush;
}

MemoryPlan plan_memory(const Config& config_in, const std::string& strategy, const MemoryBudget& budget,
                       bool shorter_batches, const StopCheck& stop, bool quiet, bool data_parallel) {
  const PlanWatch watch(stop, quiet);
  const auto t0 = std::chrono::steady_clock::now();
  MemoryPlan plan;
  try {
    plan = plan_batch(config_in, strategy, budget, shorter_batches, /*consider_hot=*/true, watch, data_parallel);
  } catch (const BudgetUnreachable& e) {
    if (config_in.data.batch_size < 2) throw;
    if (!config_in.memory.micro_batches)
      throw BudgetUnreachable(std::string(e.what()) + "; memory.micro_batches is false: with it the planner " +
                                  "would split the batch into micro-batches whose gradients accumulate",
                              e.needed, e.budget, e.exact_vanilla_peak, e.fixed);
    plan = plan_micro_batches(config_in, strategy, budget, shorter_batches, e, watch, data_parallel);
  }
  plan.profiled_on = plan_inputs(config_in, strategy);
  plan.profile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  plan.planner_peak = watch.most_held();
  return plan;
}

}  // namespace lb::train
