// CPU quantisation kernels for HOT: 16-point Hadamard transforms fused with statistics and
// int8 quantisation (round-to-nearest or stochastic), along either axis of a row-major f32
// matrix x (rows, cols) with leading dimension ldx. Formulas: lb/core/quantize_formulas.h.
//
//  - "rows" kernels transform along the contiguous axis (each row's consecutive 16-blocks;
//    cols zero-padded to cols16 = ⌈cols/16⌉·16): output (rows, cols16). This is the g_x
//    path's g_y·BD(H_16) along O, one 16-block per AVX-512 register.
//  - "cols" kernels transform along the row axis (each column, blocks of 16 consecutive
//    rows, rows zero-padded to a multiple of 16) and keep `keep.r` of the 16 outputs per
//    block (natural-order Hadamard row indices keep.idx, in output order): output
//    (⌈rows/16⌉·r, cols). This is BD(H_16)·w (all 16 kept) and HLA BD(Ĥ)·x (8 kept).
//
// Stochastic rounding: output element e (row-major index in the output) takes Philox draw e
// of `key` (quantize_formulas.h), so results do not depend on threading or vector width.
// Every function has a scalar twin in lb::cpu::ref (plain loops over the same formulas): the
// emulation oracle of the HOT strategy and the reference of the kernel tests. Results are
// bit-identical (same operations in the same order), except the f64 sums of TensorStats.
#pragma once
#include <cstdint>

#include "lb/core/conv_geometry.h"
#include "lb/core/quantize_formulas.h"
#include "src/backend/quantize_types.h"

namespace lb::cpu {

using quant::PhiloxKey;

// The plain types live in the backend (the strategy sees them there).
using backend::DualScales;
using backend::HadamardKeep;
using backend::QuantParams;
using backend::TensorStats;
using backend::cols_out_rows;
using backend::round_up16;

// Draws out[i] = draw e0 + i of the stream, i < n.
void philox_fill(const PhiloxKey& key, uint64_t e0, int64_t n, uint32_t* out);

// ---- along rows (contiguous axis) ----
// Absmax of the transformed matrix; row_absmax (nullable) receives each row's.
float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         float* row_absmax);
// q (rows, cols16) = Q(H(x) · inv), inv = row_inv[r] when row_inv is given, else `inv`.
void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q);
// Per-token in one pass: row scale = absmax(H(x_r))/qmax written to row_scale, then quantised.
void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale);
void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y);

// ---- along rows keeping keep.r outputs per 16-block (HLA along the contiguous axis) ----
// Output (rows, ⌈cols/16⌉·r) written with leading dimension ldq; a draw's element index is
// row·(⌈cols/16⌉·r) + output column. Serial: callers parallelise (e.g. over images).
float fwht16_rows_keep_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep);
void fwht16_rows_keep_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                               const HadamardKeep& keep, float inv, const QuantParams& p,
                               int8_t* q, int64_t ldq);

// ---- HLA of a convolution's im2col view, straight from int8 levels ----
// One image q (C, H, W) of levels with scale s: its columns cols (I = C·kH·kW, L = Ho·Wo) of
// the dequantised values float(q)·s are HLA-transformed along L as fwht16_rows_keep_* does,
// without materialising cols (bit-identical to im2col + those kernels). Serial.
float hla_im2col_absmax(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                        int64_t kW, const Conv2dArgs& args, const HadamardKeep& keep);
void hla_im2col_quantize(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                         int64_t kW, const Conv2dArgs& args, const HadamardKeep& keep, float inv,
                         const QuantParams& p, int8_t* out, int64_t ldq);

// The same in one transform per distinct block, when a block never crosses an output row
// (stride 1 along W, output width a multiple of 16): then the block of column row (c, i, j) at
// output row oh is the block of input row ih = oh·sh − ph + i·dh read with tap j, so the kH
// rows of each (c, j) share their blocks. hla_im2col_table transforms each (c, j, ih, block)
// once into `table` (hla_im2col_table_size floats; rows no output reads are zeros) and
// returns the absmax hla_im2col_absmax returns; hla_im2col_table_quantize rounds it to
// nearest and expands it into hla_im2col_quantize's output, bit-identical (RTN only).
bool hla_im2col_table_fits(int64_t W, int64_t kW, const Conv2dArgs& args);
int64_t hla_im2col_table_size(int64_t C, int64_t H, int64_t W, int64_t kW, const Conv2dArgs& args,
                              const HadamardKeep& keep);
float hla_im2col_table(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                       const Conv2dArgs& args, const HadamardKeep& keep, float* table);
void hla_im2col_table_quantize(const float* table, int64_t C, int64_t H, int64_t W, int64_t kH,
                               int64_t kW, const Conv2dArgs& args, const HadamardKeep& keep, float inv,
                               int qmax, int8_t* out, int64_t ldq);

// ---- along columns (blocks of 16 rows) ----
TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep);
void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q);
void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                 float* y);

// ---- both at once (HOT's g_y): two passes over x instead of four ----
// q_rows (rows, cols16): the rows transform, per-row scales (written to row_scale) or one
// per-tensor absmax scale; q_cols (⌈rows/16⌉·r, cols): the column transform, per-tensor
// absmax scale. Identical to the separate kernels with absmax scales.
DualScales fwht16_dual_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                const QuantParams& prow, bool per_row, int8_t* q_rows,
                                float* row_scale, const HadamardKeep& keep,
                                const QuantParams& pcol, int8_t* q_cols);

// ---- no transform ----
TensorStats tensor_stats(const float* x, int64_t n);
void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q);
void dequantize(const int8_t* q, int64_t n, float scale, float* y);

// Which kernels the functions above run: "avx512", "avx2" or "reference" (the scalar loops).
const char* quantize_kernel();

// Scalar references (same contracts).
namespace ref {
void philox_fill(const PhiloxKey& key, uint64_t e0, int64_t n, uint32_t* out);
float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         float* row_absmax);
void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q);
void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale);
void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y);
float fwht16_rows_keep_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep);
void fwht16_rows_keep_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                               const HadamardKeep& keep, float inv, const QuantParams& p,
                               int8_t* q, int64_t ldq);
float hla_im2col_absmax(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                        int64_t kW, const Conv2dArgs& args, const HadamardKeep& keep);
void hla_im2col_quantize(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                         int64_t kW, const Conv2dArgs& args, const HadamardKeep& keep, float inv,
                         const QuantParams& p, int8_t* out, int64_t ldq);
float hla_im2col_table(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                       const Conv2dArgs& args, const HadamardKeep& keep, float* table);
void hla_im2col_table_quantize(const float* table, int64_t C, int64_t H, int64_t W, int64_t kH,
                               int64_t kW, const Conv2dArgs& args, const HadamardKeep& keep, float inv,
                               int qmax, int8_t* out, int64_t ldq);
TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep);
void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q);
void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                 float* y);
DualScales fwht16_dual_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                const QuantParams& prow, bool per_row, int8_t* q_rows,
                                float* row_scale, const HadamardKeep& keep,
                                const QuantParams& pcol, int8_t* q_cols);
TensorStats tensor_stats(const float* x, int64_t n);
void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q);
}  // namespace ref

}  // namespace lb::cpu
