// Glob over dotted names ("encoder.layer.*.weight"): '*' matches any run of characters (dots
// included), '?' one. Module freezing and the backward policy (lb::nn) and the optimizers'
// no-decay lists (lb::optim) match parameter names with it.
#pragma once
#include <string>

namespace lb {

bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace lb
