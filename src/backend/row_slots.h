// Internal: where each row of a (V, D) tensor sits in a row-sparse gradient's values (its
// index in `rows`, -1 where the row is not there), for the kernels that read such a gradient
// (lb/autograd/row_sparse_grad.h). rows: (K,) i64, distinct, each in [0, V), on the CPU.
#pragma once
#include <cstdint>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::backend {

inline std::vector<int64_t> row_slots(const Tensor& rows, int64_t V) {
  std::vector<int64_t> slot(static_cast<size_t>(V), -1);
  const int64_t* r = rows.data<int64_t>();
  for (int64_t k = 0; k < rows.numel(); ++k) slot[static_cast<size_t>(r[k])] = k;
  return slot;
}

}  // namespace lb::backend
