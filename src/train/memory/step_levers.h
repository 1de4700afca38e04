// Internal: the whole-step levers of the memory planner (memory_planner.h) besides what
// activations keep: how the optimizer stores its moments (optimizer.state_bits: 32, 8, 4)
// and whether it updates each parameter in backward, freeing its gradient there
// (optimizer.in_backward). Under memory.budget the planner measures what a step holds
// besides activations under each setting (parameters, buffers, gradients, optimizer state),
// and gives the activation plan what is left.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/train/config.h"
#include "lb/train/memory/memory_planner.h"

namespace lb::train::planning {

struct LeverOption {
  StepLevers levers;
  FixedBytes fixed;
  double fidelity = 0;  // its prior, as fidelity_prior()'s: 1 - gradient cosine, per step
  bool unmeasured = false;  // predicted over the budget, so not measured (not offered)
};

// The settings the planner may choose for `config`: its own first, then leaner ones (state in
// fewer bits for Adam/AdamW, the update in backward on one rank), each measured by a step on
// a batch of two short examples (what they hold hardly grows with the batch: an embedding's
// gradient rows do, which the plan's full-batch measurement then sees). `budget_bytes` > 0
// (a budget in bytes): the leanest is measured first, and a setting predicted from its bytes
// to hold more than the budget besides activations is neither measured nor offered.
std::vector<LeverOption> measure_levers(const Config& config, const std::string& strategy, bool data_parallel,
                                        int64_t budget_bytes, const PlanWatch& watch);
// Optimizer state bytes per trainable element with moments in `bits` (Adam/AdamW: two
// moments and their blocks' maxima; 0: not predicted, as for SGD).
double state_bytes_per_element(const Config& c, int64_t bits);
// The config with these levers (StepLevers, FixedBytes: memory_planner.h).
Config with_levers(Config c, const StepLevers& l);
// A lever's cost in the knapsack's units (ms per step): its prior weighed as a block's is, over
// the whole step.
double lever_cost(const LeverOption& o, double exact_ms, double weight);

}  // namespace lb::train::planning
