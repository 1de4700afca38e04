// What the tape keeps for backward, attributed: every unique storage held by a live node, to
// the first node (in recording order) that keeps it, as (module path, op, role). The bytes sum
// to saved_bytes() exactly (the same storages, counted once, parameters and buffers left out).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::autograd {

struct SavedEntry {
  std::string module;  // the recording module's dotted path ("" : outside any module)
  std::string op;      // the node's name ("gelu", "linear[instant]", "layer_norm", ...)
  // How the kept tensor relates to the op: "input" (its first input), "input1", ... (others),
  // "output" (its result), "state" (anything else it computed to keep: statistics, a mask, a
  // compressed copy).
  std::string role;
  int64_t bytes = 0;   // the whole storage
  DType dtype = DType::F32;
  Shape shape;         // of the first view kept
};

std::vector<SavedEntry> saved_breakdown();

}  // namespace lb::autograd
