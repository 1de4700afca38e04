// Small training configs shared by the trainer and compare tests.
#pragma once
#include <nlohmann/json.hpp>

namespace lb::testing {

// A 2-layer BERT (hidden 32) on the program's synthetic text task: `steps` optimizer steps
// of batch 8 (0: leave the length to the caller), max_length padding to 32, AdamW.
nlohmann::json tiny_bert_config(int64_t steps, double dropout = 0.1);

}  // namespace lb::testing
