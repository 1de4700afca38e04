// Building strategies from JSON by "type". Unknown types, unknown keys and out-of-range
// values fail with the JSON path and the valid choices.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

// j: {"type": "vanilla" | "instant" | "hot", ...settings}. path: where j sits in the config.
std::unique_ptr<Strategy> make_strategy(const nlohmann::json& j, const std::string& path);
std::vector<std::string> strategy_types();

}  // namespace lb::nn::backward
