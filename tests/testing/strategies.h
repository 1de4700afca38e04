// Test helper: an INSTANT strategy built through the factory from a spec (type added), as
// the concrete class so tests can read its bases.
#pragma once
#include <memory>

#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/instant.h"

namespace lb::testing {

inline std::shared_ptr<nn::backward::Instant> make_instant(nlohmann::json spec) {
  spec["type"] = "instant";
  auto s = nn::backward::make_strategy(spec, "test");
  return std::shared_ptr<nn::backward::Instant>(static_cast<nn::backward::Instant*>(s.release()));
}

}  // namespace lb::testing
