// A memory budget (config memory.budget, --memory-budget): a bound on a training step's
// activation peak (lb/core/allocator.h: all bytes but parameters, buffers, gradients and
// optimizer state). Written as a size — "120MB" (10^6 bytes), "1.5GiB" (2^30), "800KiB",
// "123456" or "123456B" (bytes) — or as a fraction of this model's exact vanilla activation
// peak on the config's batch: "0.1x".
#pragma once
#include <cstdint>
#include <string>

namespace lb::train {

// Budgets are whole bytes in [1, 2^63): 2^63 as a double, the first value int64 cannot hold.
inline constexpr double kMaxBudgetBytes = 9223372036854775808.0;

struct MemoryBudget {
  double bytes = 0;     // a size (fraction == 0)
  double fraction = 0;  // "0.1x" (bytes == 0)
  std::string text;     // as written

  // Throws an Error naming `where` (a JSON path or a flag) and the forms it accepts.
  static MemoryBudget parse(const std::string& text, const std::string& where);
  bool is_fraction() const { return fraction > 0; }
  // The bound in bytes, given the exact vanilla activation peak a fraction refers to; at least
  // 1 and at most INT64_MAX whatever the inputs.
  int64_t resolve(int64_t exact_vanilla_peak) const;
};

// "115.2 MB (0.1x of 1152.0 MB)" style: bytes in MB (10^6), one decimal.
std::string megabytes(int64_t bytes);

}  // namespace lb::train
