// Internal: what the memory planner's parts share (memory_planner.h): the options' fidelity
// priors and costs, configs with other memory settings or backward rules, the rules that
// carry a choice out, and MB figures. The parts: memory_solver.cpp (the choice under a
// budget), memory_profile.cpp (measuring the options), memory_planner.cpp (plans per batch
// and micro-batches), memory_plan_file.cpp (the plan's table, JSON and application).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/autograd/saved_breakdown.h"
#include "lb/autograd/saved_codec.h"
#include "lb/train/config.h"
#include "lb/train/memory/memory_planner.h"

namespace lb::train::planning {

// 1 - the end-to-end gradient cosine measured for an option (see the .cpp for the figures).
double fidelity_prior(const KeepOption& o);
// Whether `module` is `block` or inside it; the bytes kept by the entries inside `block`.
bool under(const std::string& module, const std::string& block);
int64_t bytes_under(const std::vector<autograd::SavedEntry>& entries, const std::string& block);
// A codec rule for the planner (never "must match": a block's tensors may be kept first by
// the block before it).
autograd::CodecRule rule(const std::string& match, const std::string& codec);
// Option o's cost at a block: added time and the fidelity penalty (ties towards exact).
double option_cost(const MemoryProfile& p, size_t o, double weight);
// The backward rules putting `blocks`' layers on `strategy`; a config with `rules` ahead of
// its own backward rules.
nlohmann::json strategy_rules(const std::vector<std::string>& blocks, const std::string& strategy);
Config with_backward_rules(Config c, const nlohmann::json& rules);
// Whether HOT may be offered (the config leaves every layer's backward as default), and
// whether a strategy of prior `prior` could cost less than some profiled option at a block.
bool strategies_plannable(const Config& c, const std::string& strategy);
bool could_pay(const MemoryProfile& p, double prior, double weight);
// The config with these memory settings (and no budget).
Config with_memory(Config c, const std::vector<autograd::CodecRule>& codecs, std::vector<std::string> recompute,
                   std::vector<std::string> recompute_bf16 = {});
Config with_memory(Config c, const MemorySection& m);
// The rules that carry a choice out (per block, its own scope and its submodules).
MemorySection section_of(const MemoryChoice& s, const MemoryProfile& p);
// Bytes in MB, to 0.1 MB (0.001 MB below 10 MB).
std::string mb(int64_t bytes);

}  // namespace lb::train::planning
