// Internal: the plain types of HOT's quantisation kernels (src/backend/quantize.h), shared by
// the strategy, the CPU kernels (src/cpu/quantize.h) and the CUDA ones (cuda/quantize.cu):
// a quantiser's parameters, a tensor's statistics, which outputs of a 16-point Hadamard block
// are kept, and the output sizes these imply.
#pragma once
#include <cstdint>

#include "lb/core/quantize_formulas.h"

namespace lb::backend {

struct QuantParams {
  int qmax = 127;
  bool stochastic = false;
  quant::PhiloxKey key;  // stochastic only
};

struct TensorStats {
  float absmax = 0.f;
  double sum_sq = 0.0, sum_abs = 0.0;  // for SAWB
  int64_t count = 0;                   // elements seen (padding included)
};

// Kept outputs of a 16-point Hadamard block.
struct HadamardKeep {
  int r = 16;
  int idx[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
};

// Scales of the two quantisations of HOT's g_y at once (dual_quantize).
struct DualScales {
  float rows = 0.f;  // per-tensor scale of q_rows (0 when per_row)
  float cols = 0.f;  // scale of q_cols
};

inline int64_t round_up16(int64_t n) { return (n + 15) / 16 * 16; }
inline int64_t cols_out_rows(int64_t rows, const HadamardKeep& k) { return (rows + 15) / 16 * k.r; }

}  // namespace lb::backend
