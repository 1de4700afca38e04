// epoch_order (see batch.h).
#include <numeric>

#include "lb/core/philox.h"
#include "lb/data/batch.h"

namespace lb::data {

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  PhiloxStream rng(seed, static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased index in [0, i] from 64 random bits (bias below 2^-32 for any n we hold).
    // Two statements: the high word is drawn first on every compiler.
    const uint64_t hi = rng.next_u32();
    const uint64_t r = (hi << 32) | rng.next_u32();
    const int64_t j = static_cast<int64_t>(r % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace lb::data
