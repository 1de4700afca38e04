// A memory budget. memory.budget (--memory-budget) bounds the whole step: every byte the
// allocator holds over a training step, parameters, gradients, optimizer state, activations
// and workspace (lb/core/allocator.h MemStats::step_peak). memory.activation_budget
// (--activation-budget) bounds the activation peak only (all bytes but parameters, buffers,
// gradients and optimizer state), as the studies of activation memory use it. Written as a
// size — "120MB" (10^6 bytes), "1.5GiB" (2^30), "800KiB", "123456" or "123456B" (bytes) — or
// as a fraction of this model's exact vanilla peak (whole step or activations, as the
// scope) on the config's batch: "0.1x".
#pragma once
#include <cstdint>
#include <string>

namespace lb::train {

// Budgets are whole bytes in [1, 2^63): 2^63 as a double, the first value int64 cannot hold.
inline constexpr double kMaxBudgetBytes = 9223372036854775808.0;

enum class BudgetScope { Step, Activation };

struct MemoryBudget {
  double bytes = 0;     // a size (fraction == 0)
  double fraction = 0;  // "0.1x" (bytes == 0)
  std::string text;     // as written
  BudgetScope scope = BudgetScope::Step;

  // Throws an Error naming `where` (a JSON path or a flag) and the forms it accepts.
  static MemoryBudget parse(const std::string& text, const std::string& where, BudgetScope scope);
  // The same scope, `n` bytes.
  static MemoryBudget of_bytes(int64_t n, BudgetScope scope);
  bool is_fraction() const { return fraction > 0; }
  bool whole_step() const { return scope == BudgetScope::Step; }
  // "memory.budget" or "memory.activation_budget"; what it bounds ("whole step", "activation peak").
  const char* key() const;
  const char* bounds() const;
  // The bound in bytes, given the exact vanilla activation peak a fraction refers to; at least
  // 1 and at most INT64_MAX whatever the inputs.
  int64_t resolve(int64_t exact_vanilla_peak) const;
};

// "115.2 MB (0.1x of 1152.0 MB)" style: bytes in MB (10^6), one decimal.
std::string megabytes(int64_t bytes);

}  // namespace lb::train
