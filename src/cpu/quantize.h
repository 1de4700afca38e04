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

#include "src/cpu/quantize_api.inc"  // the kernels; the hla_im2col_table* pair below sizes the table

bool hla_im2col_table_fits(int64_t W, int64_t kW, const Conv2dArgs& args);
int64_t hla_im2col_table_size(int64_t C, int64_t H, int64_t W, int64_t kW, const Conv2dArgs& args,
                              const HadamardKeep& keep);
void dequantize(const int8_t* q, int64_t n, float scale, float* y);

// Which kernels the functions above run: "avx512", "avx2" or "reference" (the scalar loops).
const char* quantize_kernel();

// Scalar references (same contracts).
namespace ref {
#include "src/cpu/quantize_api.inc"
}  // namespace ref

}  // namespace lb::cpu
