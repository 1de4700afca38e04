// CPU quantisation kernels for HOT (contract in quantize.h): one dispatch choosing the
// AVX-512 kernels (quantize_avx512.cpp) where isa_enabled(Isa::Avx512), else the AVX2 + FMA
// kernels (quantize_avx2.cpp) where isa_enabled(Isa::Avx2), else the scalar references
// (quantize_ref.cpp), all bit-identical in their int8 outputs; and the CPU tables of
// src/backend/quantize.h.
#include "src/cpu/quantize.h"

#include "src/backend/quantize.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/quantize_kernels.h"

namespace lb::cpu {

using namespace quant_kernels;

void dequantize(const int8_t* q, int64_t n, float scale, float* y) {
#pragma omp parallel for if (n > 16 * kParallelWork) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(q[i]) * scale;
}

// ============================== dispatch ==============================
namespace {
const QuantizeImpl& impl() {
#if LB_QUANT_X86_64
  if (isa_enabled(Isa::Avx512)) return kQuantizeAvx512;
  if (isa_enabled(Isa::Avx2)) return kQuantizeAvx2;
#endif
  return kQuantizeReference;
}
}  // namespace

const char* quantize_kernel() {
  const QuantizeImpl* i = &impl();
#if LB_QUANT_X86_64
  if (i == &kQuantizeAvx512) return "avx512";
  if (i == &kQuantizeAvx2) return "avx2";
#endif
  return i == &kQuantizeReference ? "reference" : "?";
}

void philox_fill(const PhiloxKey& k, uint64_t e0, int64_t n, uint32_t* out) {
  impl().philox_fill(k, e0, n, out);
}
float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* ra) {
  return impl().fwht16_rows_absmax(x, rows, cols, ldx, ra);
}
void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q) {
  impl().fwht16_rows_quantize(x, rows, cols, ldx, row_inv, inv, p, q);
}
void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale) {
  impl().fwht16_rows_quantize_per_row(x, rows, cols, ldx, p, q, row_scale);
}
void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y) {
  impl().fwht16_rows(x, rows, cols, ldx, y);
}
float fwht16_rows_keep_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  return impl().fwht16_rows_keep_absmax(x, rows, cols, ldx, keep);
}
float hla_im2col_absmax(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                        int64_t kW, const Conv2dArgs& a, const HadamardKeep& keep) {
  return impl().hla_im2col_absmax(q, s, C, H, W, kH, kW, a, keep);
}
void hla_im2col_quantize(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                         int64_t kW, const Conv2dArgs& a, const HadamardKeep& keep, float inv,
                         const QuantParams& p, int8_t* out, int64_t ldq) {
  impl().hla_im2col_quantize(q, s, C, H, W, kH, kW, a, keep, inv, p, out, ldq);
}
bool hla_im2col_table_fits(int64_t W, int64_t kW, const Conv2dArgs& a) {
  return a.stride[1] == 1 && conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]) % 16 == 0;
}
int64_t hla_im2col_table_size(int64_t C, int64_t H, int64_t W, int64_t kW, const Conv2dArgs& a,
                              const HadamardKeep& keep) {
  return C * kW * H * (conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]) / 16) * keep.r;
}
float hla_im2col_table(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                       const Conv2dArgs& a, const HadamardKeep& keep, float* table) {
  return impl().hla_im2col_table(q, s, C, H, W, kH, kW, a, keep, table);
}
void hla_im2col_table_quantize(const float* table, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                               const Conv2dArgs& a, const HadamardKeep& keep, float inv, int qmax, int8_t* out,
                               int64_t ldq) {
  impl().hla_im2col_table_quantize(table, C, H, W, kH, kW, a, keep, inv, qmax, out, ldq);
}
void fwht16_rows_keep_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                               const HadamardKeep& keep, float inv, const QuantParams& p,
                               int8_t* q, int64_t ldq) {
  impl().fwht16_rows_keep_quantize(x, rows, cols, ldx, keep, inv, p, q, ldq);
}
TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  return impl().fwht16_cols_stats(x, rows, cols, ldx, keep);
}
void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q) {
  impl().fwht16_cols_quantize(x, rows, cols, ldx, keep, inv, p, q);
}
void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                 float* y) {
  impl().fwht16_cols(x, rows, cols, ldx, keep, y);
}
TensorStats tensor_stats(const float* x, int64_t n) {
  return impl().tensor_stats(x, n);
}
void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q) {
  impl().quantize(x, n, inv, p, q);
}
DualScales fwht16_dual_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                const QuantParams& prow, bool per_row, int8_t* q_rows,
                                float* row_scale, const HadamardKeep& keep,
                                const QuantParams& pcol, int8_t* q_cols) {
  return impl().fwht16_dual_quantize(x, rows, cols, ldx, prow, per_row, q_rows, row_scale, keep, pcol, q_cols);
}


}  // namespace lb::cpu

// ---------------------------------------------------------------- the CPU tables (src/backend/quantize.h)

namespace lb::backend {
namespace {

// The vector kernels (Ref = false) or the scalar references (Ref = true).
template <bool Ref>
struct Raw;
template <>
struct Raw<false> {
  static constexpr auto rows_absmax = &cpu::fwht16_rows_absmax;
  static constexpr auto rows_quantize = &cpu::fwht16_rows_quantize;
  static constexpr auto rows_quantize_per_row = &cpu::fwht16_rows_quantize_per_row;
  static constexpr auto rows = &cpu::fwht16_rows;
  static constexpr auto cols_stats = &cpu::fwht16_cols_stats;
  static constexpr auto cols_quantize = &cpu::fwht16_cols_quantize;
  static constexpr auto cols = &cpu::fwht16_cols;
  static constexpr auto dual_quantize = &cpu::fwht16_dual_quantize;
  static constexpr auto tensor_stats = &cpu::tensor_stats;
  static constexpr auto quantize = &cpu::quantize;
};
template <>
struct Raw<true> {
  static constexpr auto rows_absmax = &cpu::ref::fwht16_rows_absmax;
  static constexpr auto rows_quantize = &cpu::ref::fwht16_rows_quantize;
  static constexpr auto rows_quantize_per_row = &cpu::ref::fwht16_rows_quantize_per_row;
  static constexpr auto rows = &cpu::ref::fwht16_rows;
  static constexpr auto cols_stats = &cpu::ref::fwht16_cols_stats;
  static constexpr auto cols_quantize = &cpu::ref::fwht16_cols_quantize;
  static constexpr auto cols = &cpu::ref::fwht16_cols;
  static constexpr auto dual_quantize = &cpu::ref::fwht16_dual_quantize;
  static constexpr auto tensor_stats = &cpu::ref::tensor_stats;
  static constexpr auto quantize = &cpu::ref::quantize;
};

template <bool Ref>
float rows_absmax(const Tensor& x) {
  return Raw<Ref>::rows_absmax(x.data<float>(), x.size(0), x.size(1), x.size(1), nullptr);
}
template <bool Ref>
void rows_quantize(const Tensor& x, float inv, const QuantParams& p, Tensor& q) {
  Raw<Ref>::rows_quantize(x.data<float>(), x.size(0), x.size(1), x.size(1), nullptr, inv, p, q.data<int8_t>());
}
template <bool Ref>
void rows_quantize_per_row(const Tensor& x, const QuantParams& p, Tensor& q, Tensor& row_scale) {
  Raw<Ref>::rows_quantize_per_row(x.data<float>(), x.size(0), x.size(1), x.size(1), p, q.data<int8_t>(),
                                  row_scale.data<float>());
}
template <bool Ref>
void rows(const Tensor& x, Tensor& y) {
  Raw<Ref>::rows(x.data<float>(), x.size(0), x.size(1), x.size(1), y.data<float>());
}
template <bool Ref>
TensorStats cols_stats(const Tensor& x, const HadamardKeep& keep) {
  return Raw<Ref>::cols_stats(x.data<float>(), x.size(0), x.size(1), x.size(1), keep);
}
template <bool Ref>
void cols_quantize(const Tensor& x, const HadamardKeep& keep, float inv, const QuantParams& p, Tensor& q) {
  Raw<Ref>::cols_quantize(x.data<float>(), x.size(0), x.size(1), x.size(1), keep, inv, p, q.data<int8_t>());
}
template <bool Ref>
void cols(const Tensor& x, const HadamardKeep& keep, Tensor& y) {
  Raw<Ref>::cols(x.data<float>(), x.size(0), x.size(1), x.size(1), keep, y.data<float>());
}
template <bool Ref>
DualScales dual_quantize(const Tensor& x, const QuantParams& prow, bool per_row, Tensor& q_rows,
                              Tensor& row_scale, const HadamardKeep& keep, const QuantParams& pcol,
                              Tensor& q_cols) {
  return Raw<Ref>::dual_quantize(x.data<float>(), x.size(0), x.size(1), x.size(1), prow, per_row,
                                 q_rows.data<int8_t>(), data_or_null<float>(row_scale), keep, pcol,
                                 q_cols.data<int8_t>());
}

double dequantized_l2_error(const Tensor& q, const Tensor& row_scale, float scale, const Tensor& t) {
  const int64_t rows = q.size(0), n = q.size(1);
  const int8_t* qq = q.data<int8_t>();
  const float* pt = t.data<float>();
  const float* rs = data_or_null<float>(row_scale);
  double e = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double s = rs ? rs[r] : scale;
    for (int64_t c = 0; c < n; ++c) {
      const double d = qq[r * n + c] * s - pt[r * n + c];
      e += d * d;
    }
  }
  return std::sqrt(e);
}

template <bool Ref>
float absmax(const Tensor& x) {
  return Raw<Ref>::tensor_stats(x.data<float>(), x.numel()).absmax;
}
template <bool Ref>
void quantize(const Tensor& x, float inv, const QuantParams& p, Tensor& q) {
  Raw<Ref>::quantize(x.data<float>(), x.numel(), inv, p, q.data<int8_t>());
}
void dequantize(const Tensor& q, float scale, Tensor& y) {  // one version: a plain loop
  cpu::dequantize(q.data<int8_t>(), q.numel(), scale, y.data<float>());
}

template <bool Ref>
constexpr QuantizeKernels table() {
  return {rows_absmax<Ref>, rows_quantize<Ref>, rows_quantize_per_row<Ref>, rows<Ref>, cols_stats<Ref>,
          cols_quantize<Ref>, cols<Ref>, dual_quantize<Ref>, dequantized_l2_error, absmax<Ref>,
          quantize<Ref>, dequantize};
}

}  // namespace

const QuantizeKernels kCpuQuantize = table<false>();
const QuantizeKernels kCpuQuantizeReference = table<true>();
const HlaIm2colKernels kCpuHlaIm2col{cpu::hla_im2col_table_fits, cpu::hla_im2col_table_size,
                                     cpu::hla_im2col_table,      cpu::hla_im2col_table_quantize,
                                     cpu::hla_im2col_absmax,     cpu::hla_im2col_quantize};

}  // namespace lb::backend
