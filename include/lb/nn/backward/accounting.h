// Backward-cost accounting for a model, per layer and in total (docs/algorithms.md "Accounting"):
// the paper metrics (backward GEMM MFLOPs per sample, saved-input MiB in fp32 terms, at each
// layer's last geometry) next to the measured ones (bytes the strategies kept at their last
// call, backward milliseconds, what the tape holds now, allocator current/peak by tag).
#pragma once
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

// The paper metrics of each layer's last call, summed over layers: per-sample figures times
// the call's B samples, so they hold for any layout (a padding-free BERT batch is one
// "sample" of N tokens). Divide by the call's examples for per-example figures.
struct PaperTotals {
  double backward_flops = 0;
  double saved_bytes_fp32 = 0;
};
PaperTotals paper_totals_last_call(const std::vector<std::shared_ptr<Strategy>>& strategies);

// {"layers": [Strategy::report()...], "total": {...}, "memory": {...}}
nlohmann::json accounting_report(const std::vector<std::shared_ptr<Strategy>>& strategies);

}  // namespace lb::nn::backward
