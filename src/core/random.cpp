// Default generator (see random.h). Not thread-safe: initialise modules from one thread.
#include "lb/core/random.h"

namespace lb {

PhiloxStream& default_generator() {
  static PhiloxStream gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator() = PhiloxStream(seed); }

}  // namespace lb
