// Backward-cost accounting for a model, per layer and in total (ALGORITHMS.md "Accounting"):
// the paper metrics (backward GEMM MFLOPs per sample, saved-input MiB in fp32 terms, at each
// layer's last geometry) next to the measured ones (bytes the strategies kept at their last
// call, backward milliseconds, what the tape holds now, allocator current/peak by tag).
#pragma once
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

// {"layers": [Strategy::report()...], "total": {...}, "memory": {...}}
nlohmann::json accounting_report(const std::vector<std::shared_ptr<Strategy>>& strategies);

}  // namespace lb::nn::backward
