// The default generator for parameter initialisation (like torch.manual_seed): a Philox
// stream on subsequence 0 of the seed. Training-time randomness (dropout, data order,
// stochastic rounding) uses explicitly keyed streams instead, so runs are reproducible.
#pragma once
#include <cstdint>

#include "lb/core/philox.h"

namespace lb {

PhiloxStream& default_generator();
void manual_seed(uint64_t seed);

}  // namespace lb
