// Building strategies from JSON by "type". Unknown types, unknown keys and out-of-range
// values fail with the JSON path and the valid choices.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/json_reader.h"
#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

// j: {"type": "vanilla" | "instant" | "hot", ...settings}. path: where j sits in the config.
std::unique_ptr<Strategy> make_strategy(const nlohmann::json& j, const std::string& path);
std::vector<std::string> strategy_types();

// Reads a strategy's settings (every key but "type"; unknown keys are errors once it returns).
using StrategyBuilder = std::function<std::unique_ptr<Strategy>(JsonReader&)>;
// Adds a type to the table, for a strategy defined outside the library (a test's, a user's);
// call it before configs are read. A type already there is an error.
void register_strategy_type(const std::string& type, StrategyBuilder build);

}  // namespace lb::nn::backward
