// MemoryBudget: parsing sizes and fractions (see memory_budget.h).
#include "lb/train/memory/memory_budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "lb/core/error.h"

namespace lb::train {

MemoryBudget MemoryBudget::parse(const std::string& text, const std::string& where, BudgetScope scope) {
  const auto bad = [&](const std::string& why) {
    return Error(where + ": '" + text + "' is not a memory budget (" + why +
                 "); write a size such as 120MB, 1.5GiB, 800KiB or 123456 (bytes), or a fraction of the "
                 "exact vanilla " + (scope == BudgetScope::Step ? "step's" : "activation") + " peak such as 0.1x");
  };
  if (text.empty()) throw bad("it is empty");
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) throw bad("it does not start with a number");
  char* end = nullptr;
  const std::string number = text.substr(0, i);
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(v)) throw bad("the number does not parse");
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  MemoryBudget b;
  b.text = text;
  b.scope = scope;
  if (unit == "x") {
    if (!(v > 0 && v <= 1)) throw bad("a fraction is above 0 and at most 1");
    b.fraction = v;
    return b;
  }
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1},         {"B", 1},           {"KB", 1e3},           {"MB", 1e6},           {"GB", 1e9},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TB", 1e12}, {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : units)
    if (unit == name) {
      if (!(v > 0)) throw bad("a budget is more than 0 bytes");
      b.bytes = v * scale;
      if (b.bytes < 1) throw bad("a budget is at least 1 byte");
      if (b.bytes >= kMaxBudgetBytes) throw bad("a budget is below 2^63 bytes");
      return b;
    }
  throw bad("unknown unit '" + unit + "'");
}

MemoryBudget MemoryBudget::of_bytes(int64_t n, BudgetScope scope) {
  return parse(std::to_string(std::max<int64_t>(1, n)), "internal budget", scope);
}

const char* MemoryBudget::key() const {
  return whole_step() ? "memory.budget" : "memory.activation_budget";
}

const char* MemoryBudget::bounds() const { return whole_step() ? "whole step" : "activation peak"; }

int64_t MemoryBudget::resolve(int64_t exact_vanilla_peak) const {
  // Saturating: a double at or past 2^63 has no int64 value (the cast would be undefined).
  const double v = is_fraction() ? fraction * static_cast<double>(exact_vanilla_peak) : bytes;
  if (!(v >= 1)) return 1;
  if (v >= kMaxBudgetBytes) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

std::string megabytes(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

}  // namespace lb::train
