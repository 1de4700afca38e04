// Internal: the per-thread work of the CUDA quantisation kernels (cuda/quantize.cu) as
// __host__ __device__ functions, so a CPU test can run every "thread" of a launch in a loop
// and compare the result with the CPU kernels (tests/unit/quantize_blocks_test.cpp): the index
// arithmetic, padding and kept-row selection the GPU runs are checked on every machine.
//   rows: thread t = (row r, 16-column block c0 / 16) of x (rows, cols), output (rows, cols16)
//   cols: thread t = (16-row block b, column c), output row b·keep.r + j for kept row j
#pragma once
#include <cstdint>

#include "lb/core/quantize_formulas.h"
#include "src/backend/quantize_types.h"

namespace lb::backend::quant_blocks {

LB_HD inline int8_t quantize_one(float x, float inv, const QuantParams& p, uint64_t e) {
  return p.stochastic ? quant::quantize_sr(x, inv, p.qmax, quant::philox_draw(p.key, e))
                      : quant::quantize_rtn(x, inv, p.qmax);
}

// ---- rows
LB_HD inline int64_t row_threads(int64_t rows, int64_t cols) { return rows * ((cols + 15) / 16); }
// Loads and transforms thread t's block; sets its row and first column.
LB_HD inline void row_block(const float* x, int64_t cols, int64_t t, int64_t* r, int64_t* c0, float a[16]) {
  const int64_t nb = (cols + 15) / 16;
  *r = t / nb;
  *c0 = (t % nb) * 16;
  for (int j = 0; j < 16; ++j) a[j] = *c0 + j < cols ? x[*r * cols + *c0 + j] : 0.f;
  quant::fwht16_block(a);
}
LB_HD inline float block_absmax(const float a[16]) {
  float m = 0.f;
  for (int j = 0; j < 16; ++j) m = ::fmaxf(m, ::fabsf(a[j]));
  return m;
}
// Output element of column c0 + j of row r (row-major (rows, cols16)): also its draw index.
LB_HD inline int64_t row_output(int64_t r, int64_t c0, int j, int64_t cols) {
  return r * ((cols + 15) / 16 * 16) + c0 + j;
}
LB_HD inline void quantize_row_block(const float a[16], int64_t r, int64_t c0, int64_t cols, float inv,
                                     const QuantParams& p, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    const int64_t e = row_output(r, c0, j, cols);
    q[e] = quantize_one(a[j], inv, p, static_cast<uint64_t>(e));
  }
}

// ---- columns
LB_HD inline int64_t col_threads(int64_t rows, int64_t cols) { return (rows + 15) / 16 * cols; }
LB_HD inline void col_block(const float* x, int64_t rows, int64_t cols, int64_t t, int64_t* b, int64_t* c,
                            float a[16]) {
  *b = t / cols;
  *c = t % cols;
  for (int k = 0; k < 16; ++k) a[k] = 16 * *b + k < rows ? x[(16 * *b + k) * cols + *c] : 0.f;
  quant::fwht16_block(a);
}
// Output element (and draw index) of kept row j of block b, column c.
LB_HD inline int64_t col_output(int64_t b, int j, int keep_r, int64_t cols, int64_t c) {
  return (b * keep_r + j) * cols + c;
}

}  // namespace lb::backend::quant_blocks
