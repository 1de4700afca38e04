// HOT backward strategy (contract and notation in lb/nn/backward/hot.h): settings, the HLA
// basis, LQS, the g_x (HQ) and g_w (HLA) paths on int8 kernels, Conv2d, paper metrics.
#include "lb/nn/backward/hot.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lb/autograd/grad_mode.h"
#include "lb/core/checks.h"
#include "lb/core/json_reader.h"
#include "lb/core/quantize_formulas.h"
#include "lb/ops/elementwise.h"
#include "lb/ops/linalg.h"
#include "src/backend/copy.h"
#include "src/backend/int8_gemm.h"
#include "src/backend/quantize.h"

namespace lb::nn::backward {

namespace {

using backend::DualScales;
using backend::HadamardKeep;
using backend::QuantizeKernels;
using backend::QuantParams;
using backend::TensorStats;
using backend::cols_out_rows;
using backend::round_up16;

constexpr int kGwBits = 8;                  // both g_w operands: X̂ (RTN) and Ĝ (SR)
constexpr int64_t kMaxChunk = int64_t{1} << 17;  // int32-safe contraction for 8-bit x 8-bit
enum TensorId : int { kGxId = 0, kGwId = 1, kLqsId = 2 };

HadamardKeep keep_of(const std::vector<int>& rows) {
  HadamardKeep k;
  k.r = static_cast<int>(rows.size());
  for (size_t j = 0; j < rows.size(); ++j) k.idx[j] = rows[j];
  return k;
}

const HadamardKeep kAll16 = keep_of({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});

// The device's vector kernels, or the CPU's scalar references for the emulation oracle.
const QuantizeKernels& kernels_for(const HotSettings& s, Device d) {
  return s.emulate ? backend::kCpuQuantizeReference : backend::quantize_kernels(d);
}

Tensor workspace(const Shape& shape, DType dtype, Device device = Device::cpu()) {
  return Tensor::empty(shape, dtype, device, MemTag::Workspace);
}

void check_f32(const Tensor& t, const std::string& layer, const char* what) {
  LB_CHECK(t.dtype() == DType::F32, "backward strategy 'hot' (", layer, "): ", what, " is ",
           dtype_name(t.dtype()), " ", shape_str(t.shape()),
           "; HOT runs on f32. HINT: use the vanilla strategy for f64 gradient checks");
}

bool is_pointwise(const ConvGeometry& cg) {
  const auto& a = cg.args;
  return cg.kH == 1 && cg.kW == 1 && a.stride[0] == 1 && a.stride[1] == 1 && a.padding[0] == 0 &&
         a.padding[1] == 0;
}

const char* lqs_name(Hot::Lqs l) {
  switch (l) {
    case Hot::Lqs::PerToken: return "per_token";
    case Hot::Lqs::PerTensor: return "per_tensor";
    default: return "undecided";
  }
}

}  // namespace

// ---------------------------------------------------------------- settings

HotSettings HotSettings::from_json(JsonReader& r) {
  HotSettings s;
  s.gx_bits = static_cast<int>(r.integer("gx_bits", 8, 1, 64));
  LB_CHECK(s.gx_bits == 4 || s.gx_bits == 8, r.path(), ".gx_bits: must be 4 or 8, got ", s.gx_bits);
  s.hla_basis = r.choice("hla_basis", "sequency", {"sequency", "lbp_triangle"});
  s.full_basis = r.boolean("full_basis", false);
  const bool has_rank = r.has("hla_rank");
  s.hla_rank = static_cast<int>(r.integer("hla_rank", 8, 1, 16));
  if (s.full_basis) {
    LB_CHECK(!has_rank || s.hla_rank == 16, r.path(), ".hla_rank: full_basis keeps all 16 rows; got ",
             s.hla_rank, ". HINT: drop hla_rank or set it to 16");
    s.hla_rank = 16;
  } else if (s.hla_basis == "lbp_triangle") {
    LB_CHECK(!has_rank || s.hla_rank == 10, r.path(), ".hla_rank: the lbp_triangle basis keeps 10 rows; got ",
             s.hla_rank, ". HINT: drop hla_rank or set it to 10");
    s.hla_rank = 10;
  }
  s.lqs = r.boolean("lqs", true);
  s.w_scale = r.choice("w_scale", "absmax", {"absmax", "sawb"});
  s.quantize = r.boolean("quantize", true);
  s.emulate = r.boolean("emulate", false);
  LB_CHECK(!s.emulate || s.quantize, r.path(),
           ".emulate: the oracle emulates the quantised path; it needs quantize: true");
  return s;
}

nlohmann::json HotSettings::to_json() const {
  return {{"type", "hot"},         {"gx_bits", gx_bits}, {"hla_rank", hla_rank},
          {"hla_basis", hla_basis}, {"lqs", lqs},         {"w_scale", w_scale},
          {"quantize", quantize},   {"full_basis", full_basis}, {"emulate", emulate}};
}

std::vector<int> hla_rows(const HotSettings& s) {
  // Natural-order rows sorted by sequency (Walsh order).
  std::vector<int> by_seq(16);
  for (int i = 0; i < 16; ++i) by_seq[quant::hadamard_sequency(i, 16)] = i;
  std::vector<int> seqs;
  if (s.full_basis) {
    for (int q = 0; q < 16; ++q) seqs.push_back(q);
  } else if (s.hla_basis == "lbp_triangle") {
    // The reference code's make_WHT for n = 16: a 4x4 boustrophedon grid of
    // sequencies, keeping the low-pass triangle i + j ≤ 3 (sf = 0 at vectorPercentile 50).
    constexpr int S = 4;
    for (int i = 0; i < S; ++i) {
      const int lo = i % 2 == 0 ? S * i : S * i + i, hi = i % 2 == 0 ? S * (i + 1) - i : S * (i + 1);
      for (int q = lo; q < hi; ++q) seqs.push_back(q);
    }
  } else {
    for (int q = 0; q < s.hla_rank; ++q) seqs.push_back(q);
  }
  std::vector<int> rows;
  for (int q : seqs) rows.push_back(by_seq[q]);
  return rows;
}

Hot::Hot(HotSettings s) : settings_(std::move(s)), rows_(hla_rows(settings_)) {
  if (!settings_.quantize) lqs_how_ = "not used (quantize: false)";
}

nlohmann::json Hot::hyperparams() const { return settings_.to_json(); }

// ---------------------------------------------------------------- helpers

namespace {
// `step` keys the draws of stochastic rounding; a stream other than training's (the probe's)
// mixes into the seed, so the training stream's keys are those of the step alone.
QuantParams qparams(int bits, bool stochastic, int64_t layer_id, int tensor_id, const StepContext& step = {},
                    int64_t micro = 0) {
  QuantParams p;
  p.qmax = quant::qmax_for_bits(bits);
  p.stochastic = stochastic;
  const uint64_t seed = step.seed ^ (step.stream * 0xD1B54A32D192ED03ULL);
  p.key = quant::philox_key(seed, step.step, layer_id, tensor_id, micro);
  return p;
}

// g_y (M, O) quantised for the paths that need it: q_G (M, O16) SR at gx_bits with per-token
// (row_scale) or per-tensor (s_g) scale, and q_Ĝ (Kr, O) = Q8_sr(BD(Ĥ)·g_y) with scale s_gh.
struct GyQuant {
  Tensor gq, row_scale, ghq;
  float s_g = 0.f, s_gh = 0.f;
};

GyQuant quantize_grad_output(const QuantizeKernels& k, const HotSettings& st, const HadamardKeep& keep,
                             int64_t layer_id, const StepContext& step, int64_t micro, bool per_token,
                             const Tensor& g2d, bool for_gx, bool for_gw) {
  const int64_t M = g2d.size(0), O = g2d.size(1), O16 = round_up16(O);
  const Device dev = g2d.device();
  const QuantParams pr = qparams(st.gx_bits, true, layer_id, kGxId, step, micro);
  const QuantParams pc = qparams(kGwBits, true, layer_id, kGwId, step, micro);
  GyQuant r;
  if (for_gx) r.gq = workspace({M, O16}, DType::I8, dev);
  if (for_gx && per_token) r.row_scale = workspace({M}, DType::F32, dev);
  if (for_gw) r.ghq = workspace({cols_out_rows(M, keep), O}, DType::I8, dev);
  if (for_gx && for_gw) {  // one fused pair of passes over g_y
    const DualScales ds = k.dual_quantize(g2d, pr, per_token, r.gq, r.row_scale, keep, pc, r.ghq);
    r.s_g = ds.rows;
    r.s_gh = ds.cols;
  } else if (for_gx) {
    if (per_token) {
      k.rows_quantize_per_row(g2d, pr, r.gq, r.row_scale);
    } else {
      const float m = k.rows_absmax(g2d);
      r.s_g = quant::scale_from_absmax(m, pr.qmax);
      k.rows_quantize(g2d, quant::inv_scale_from_absmax(m, pr.qmax), pr, r.gq);
    }
  } else if (for_gw) {
    const float m = k.cols_stats(g2d, keep).absmax;
    r.s_gh = quant::scale_from_absmax(m, pc.qmax);
    k.cols_quantize(g2d, keep, quant::inv_scale_from_absmax(m, pc.qmax), pc, r.ghq);
  }
  return r;
}

// W̃ = BD(H_16)·w along O (O16, I), one per-tensor scale (absmax or SAWB), round-to-nearest.
struct WeightQuant {
  Tensor wq;
  float s_w = 0.f;
};

WeightQuant quantize_weight(const QuantizeKernels& k, const HotSettings& st, int64_t layer_id, const Tensor& w) {
  const int64_t O = w.size(0), I = w.size(1);
  const int qmax = quant::qmax_for_bits(st.gx_bits);
  const TensorStats ws = k.cols_stats(w, kAll16);
  float clip = ws.absmax;
  if (st.w_scale == "sawb" && ws.count > 0) {
    const float c = quant::sawb_clip(ws.sum_sq / static_cast<double>(ws.count),
                                     ws.sum_abs / static_cast<double>(ws.count));
    if (c > 0.f) clip = c;  // SAWB breaks down (c ≤ 0) for near-constant magnitudes
  }
  WeightQuant r;
  r.s_w = quant::scale_from_absmax(clip, qmax);
  r.wq = workspace({round_up16(O), I}, DType::I8, w.device());
  k.cols_quantize(w, kAll16, quant::inv_scale_from_absmax(clip, qmax), qparams(st.gx_bits, false, layer_id, kGxId),
                  r.wq);
  return r;
}
}  // namespace

void Hot::compress_tokens(const Tensor& x2d, SavedState& s) const {
  const int64_t M = x2d.size(0), I = x2d.size(1);
  const HadamardKeep keep = keep_of(rows_);
  const int64_t Kr = cols_out_rows(M, keep);
  const QuantizeKernels& k = kernels_for(settings_, x2d.device());
  if (!settings_.quantize) {
    Tensor xh = Tensor::empty({Kr, I}, DType::F32, x2d.device());
    k.cols(x2d, keep, xh);
    s.tensors = {xh};
    s.scalars = {1.0};
    return;
  }
  const TensorStats st = k.cols_stats(x2d, keep);
  const int qmax = quant::qmax_for_bits(kGwBits);
  Tensor xq = Tensor::empty({Kr, I}, DType::I8, x2d.device());
  k.cols_quantize(x2d, keep, quant::inv_scale_from_absmax(st.absmax, qmax), qparams(kGwBits, false, record_.id, kGwId),
                  xq);
  s.tensors = {xq};
  s.scalars = {quant::scale_from_absmax(st.absmax, qmax)};
}

Gradients Hot::gradients(const Tensor& g2d, const Tensor& w_in, bool want_gx, bool want_gw,
                         const Tensor& xhat, float s_x, const StepContext& step) {
  const int64_t M = g2d.size(0), O = g2d.size(1), O16 = round_up16(O);
  const HadamardKeep keep = keep_of(rows_);
  const int64_t Kr = cols_out_rows(M, keep);
  const Device dev = g2d.device();
  const QuantizeKernels& k = kernels_for(settings_, dev);
  Tensor w;
  int64_t I = 0;
  if (want_gx) {
    w = backend::contiguous(w_in);
    check_f32(w, record_.name, "w");
    I = w.size(1);
    if (lqs_ == Lqs::Undecided) run_lqs(g2d, "first backward", step);
  }
  if (want_gw) {
    LB_CHECK(xhat.size(0) == Kr, "hot (", record_.name, "): saved state has ", xhat.size(0), " rows for ", M,
             " tokens");
    I = xhat.size(1);
  }
  Gradients out;
  if (!settings_.quantize) {  // the same transforms in f32: g_x = (G̃ W̃) / 16, g_w = Ĝᵀ X̂ / 16
    NoGradGuard no_grad;
    if (want_gx) {
      Tensor gt = workspace({M, O16}, DType::F32, dev), wt = workspace({O16, I}, DType::F32, dev);
      k.rows(g2d, gt);
      k.cols(w, kAll16, wt);
      out.grad_input = matmul(gt, wt);
      mul_scalar_(out.grad_input, 1.0 / 16);  // a power of two: exact
    }
    if (want_gw) {
      Tensor gh = workspace({Kr, O}, DType::F32, dev);
      k.cols(g2d, keep, gh);
      out.grad_weight = matmul(gh, xhat, true, false);
      mul_scalar_(out.grad_weight, 1.0 / 16);
    }
    return out;
  }
  const GyQuant q =
      quantize_grad_output(k, settings_, keep, record_.id, step, next_micro(step), lqs_ == Lqs::PerToken, g2d, want_gx,
                           want_gw);
  const backend::Int8GemmKernels& int8 = backend::int8_gemm_kernels(dev);
  // ---- g_x = (q_G q_W) · s_G(row) · s_W / 16
  if (want_gx) {
    const WeightQuant wq = quantize_weight(k, settings_, record_.id, w);
    out.grad_input = Tensor::empty({M, I}, DType::F32, dev);
    if (settings_.emulate) {
      const float* rs = q.row_scale.defined() ? q.row_scale.data<float>() : nullptr;
      backend::kCpuInt8GemmHost.emulated_f64(false, M, I, O16, q.gq.data<int8_t>(), rs, q.s_g, wq.wq.data<int8_t>(),
                                             wq.s_w, 1.0 / 16, out.grad_input.data<float>());
    } else {  // the row scale in the epilogue, the rest in alpha
      const float alpha = (q.row_scale.defined() ? 1.f : q.s_g) * wq.s_w / 16.f;
      int8.gemm_f32(false, false, M, I, O16, q.gq, 0, O16, wq.wq, 0, I, out.grad_input, I, q.row_scale, alpha, false);
    }
  }
  // ---- g_w = (Ĝᵀ X̂) · s_Ĝ · s_X / 16 over the reduced token axis
  if (want_gw) {
    out.grad_weight = Tensor::empty({O, I}, DType::F32, dev);
    if (settings_.emulate) {
      backend::kCpuInt8GemmHost.emulated_f64(true, O, I, Kr, q.ghq.data<int8_t>(), nullptr, q.s_gh,
                                             xhat.data<int8_t>(), s_x, 1.0 / 16, out.grad_weight.data<float>());
    } else {  // int32-safe chunks of the contraction, summed in f32
      const float alpha = q.s_gh * s_x / 16.f;
      if (Kr == 0) out.grad_weight.zero_();
      for (int64_t k0 = 0; k0 < Kr; k0 += kMaxChunk)
        int8.gemm_f32(true, false, O, I, std::min(kMaxChunk, Kr - k0), q.ghq, k0 * O, O, xhat, k0 * I, I,
                      out.grad_weight, I, Tensor(), alpha, k0 > 0);
    }
  }
  return out;
}

// ---------------------------------------------------------------- LQS

int64_t Hot::next_micro(const StepContext& step) {
  if (step.step != draw_step_ || step.stream != draw_stream_) {
    draw_step_ = step.step;
    draw_stream_ = step.stream;
    draw_micro_ = 0;
  } else {
    ++draw_micro_;
  }
  return draw_micro_;
}

void Hot::run_lqs(const Tensor& g2d, const char* how, const StepContext& step) {
  if (lqs_ != Lqs::Undecided || !settings_.quantize) return;
  if (!settings_.lqs) {
    lqs_ = Lqs::PerTensor;
    lqs_how_ = "disabled (lqs: false)";
    return;
  }
  const int64_t M = g2d.size(0), O = g2d.size(1), O16 = round_up16(O);
  const Device dev = g2d.device();
  const QuantizeKernels& k = backend::quantize_kernels(dev);  // LQS uses the vector kernels even when emulating
  const int qmax = quant::qmax_for_bits(settings_.gx_bits);
  Tensor gt = workspace({M, O16}, DType::F32, dev);
  k.rows(g2d, gt);  // the tensor both quantisers see
  const QuantParams p = qparams(settings_.gx_bits, true, record_.id, kLqsId, step);
  Tensor q = workspace({M, O16}, DType::I8, dev);
  const float m = k.rows_absmax(g2d);
  k.rows_quantize(g2d, quant::inv_scale_from_absmax(m, qmax), p, q);
  err_tensor_ = k.dequantized_l2_error(q, Tensor(), quant::scale_from_absmax(m, qmax), gt);
  Tensor rs = workspace({M}, DType::F32, dev);
  k.rows_quantize_per_row(g2d, p, q, rs);
  err_token_ = k.dequantized_l2_error(q, rs, 0.f, gt);
  lqs_ = err_token_ < 0.5 * err_tensor_ ? Lqs::PerToken : Lqs::PerTensor;
  lqs_how_ = how;
  spdlog::debug("hot: layer '{}' LQS chose {} (L2 error per-token {:.4g}, per-tensor {:.4g}; {})",
               record_.name, lqs_name(lqs_), err_token_, err_tensor_, how);
}

bool Hot::needs_calibration(int64_t) const {
  return settings_.quantize && settings_.lqs && lqs_ == Lqs::Undecided;
}

void Hot::observe_grad_output(const Tensor& g_y, const SequenceOffsets&, const StepContext& step) {
  if (g_y.dtype() != DType::F32) return;
  const Tensor g = backend::contiguous(g_y);
  run_lqs(g.view({g.numel() / g.size(-1), g.size(-1)}), "calibration", step);
}

nlohmann::json Hot::state_json() const {
  return {{"lqs", {{"choice", lqs_name(lqs_)}, {"err_token", err_token_}, {"err_tensor", err_tensor_}}}};
}

void Hot::load_state_json(const nlohmann::json& j) {
  const std::string path = "hot state (" + record_.name + ")";
  JsonReader r(j, path);
  if (r.has("lqs")) {
    JsonReader l(r.raw("lqs"), path + ".lqs");
    const std::string c = l.choice("choice", "undecided", {"per_token", "per_tensor", "undecided"});
    err_token_ = l.number("err_token", 0, 0, 1e300);
    err_tensor_ = l.number("err_tensor", 0, 0, 1e300);
    l.finish();
    lqs_ = c == "per_token" ? Lqs::PerToken : c == "per_tensor" ? Lqs::PerTensor : Lqs::Undecided;
    lqs_how_ = "checkpoint";
  }
  r.finish();
}

// ---------------------------------------------------------------- Linear

SavedState Hot::save_impl(const Tensor& x, const Tensor&, const CallContext&) {
  check_f32(x, record_.name, "x");
  device_ = x.device();
  last_conv_raw_ = false;
  SavedState s;
  compress_tokens(x.view({x.size(0) * x.size(1), x.size(2)}), s);
  return s;
}

Gradients Hot::backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                             bool want_gw) {
  check_f32(g_y, record_.name, "g_y");
  // Plain copies, not a structured binding: lambdas below capture them (C++20 allows
  // capturing bindings, clang before 16 does not).
  const int64_t B = s.geom.B, L = s.geom.L, I = s.geom.I, O = s.geom.O;
  Gradients out = gradients(g_y.view({B * L, O}), w, want_gx, want_gw, want_gw ? s.tensors.at(0) : Tensor(),
                            want_gw ? static_cast<float>(s.scalars.at(0)) : 0.f, s.step);
  if (want_gx) out.grad_input = out.grad_input.view({B, L, I});
  return out;
}

// ---------------------------------------------------------------- Conv2d

SavedState Hot::save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg, const CallContext& call) {
  last_conv_raw_ = false;
  if (record_.calibrating || is_pointwise(cg)) return Strategy::save_conv_impl(x, w2d, cg, call);
  const int64_t N = cg.x_shape[0], L = cg.Ho * cg.Wo, I = w2d.size(1), O = w2d.size(0);
  // Keep whichever is smaller: the int8 HLA of the im2col tokens (e.g. 1×1 stride 2) or the
  // int8 raw input (k > 1: the tokens are k² times larger).
  const int64_t token_bytes = cols_out_rows(N * L, keep_of(rows_)) * I;
  if (token_bytes <= x.numel()) return Strategy::save_conv_impl(x, w2d, cg, call);
  check_f32(x, record_.name, "x");
  record_.measured.last_geom = {N, L, I, O};
  last_conv_raw_ = true;
  SavedState s;
  s.geom = record_.measured.last_geom;
  if (!settings_.quantize) {
    s.tensors = {x};
    s.scalars = {1.0};
  } else {
    const Tensor xc = backend::contiguous(x);
    const QuantizeKernels& k = kernels_for(settings_, xc.device());
    const int qmax = quant::qmax_for_bits(kGwBits);
    const float m = k.absmax(xc);
    Tensor xq = Tensor::empty(x.shape(), DType::I8, xc.device());
    k.quantize(xc, quant::inv_scale_from_absmax(m, qmax), qparams(kGwBits, false, record_.id, kGwId), xq);
    s.tensors = {xq};
    s.scalars = {quant::scale_from_absmax(m, qmax)};
  }
  record_.measured.last_saved_bytes = static_cast<int64_t>(s.tensors[0].nbytes());
  return s;
}

Gradients Hot::backward_conv_tokens_impl(const SavedState& s, const Tensor& g_y_tokens, const Tensor& w2d,
                                         bool want_gx, bool want_gw, const ConvGeometry& cg) {
  if (s.exact || s.tensors.empty() || s.tensors[0].dim() != 4)  // tokens path: like Linear
    return Strategy::backward_conv_tokens_impl(s, g_y_tokens, w2d, want_gx, want_gw, cg);
  const auto t0 = std::chrono::steady_clock::now();
  check_f32(g_y_tokens, record_.name, "g_y");
  // Plain copies, not a structured binding: lambdas below capture them (C++20 allows
  // capturing bindings, clang before 16 does not).
  const int64_t N = s.geom.B, L = s.geom.L, I = s.geom.I, O = s.geom.O;
  // Per-image fast path: when 16 | L, HLA blocks never straddle images, so X̂ can be built
  // image by image from the im2col columns (I, L) without the (N, L, I) token tensor, and
  // g_x can be produced per image in the columns layout and folded by col2im at once.
  if (settings_.quantize && !settings_.emulate && L % 16 == 0) {
    Gradients out = backward_conv_images(s, g_y_tokens, w2d, want_gx, want_gw, cg);
    record_.count_backward(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return out;
  }
  SavedState xs;
  if (want_gw) {
    // Dequantise the raw input, im2col, then HLA + requantisation as for a Linear input.
    Tensor x = s.tensors[0];
    if (settings_.quantize) {
      x = workspace(s.tensors[0].shape(), DType::F32, s.tensors[0].device());
      kernels_for(settings_, x.device()).dequantize(s.tensors[0], static_cast<float>(s.scalars[0]), x);
    }
    const Tensor tokens = conv_to_tokens(x, cg);  // (N, L, I)
    compress_tokens(tokens.view({N * L, I}), xs);
  }
  Gradients out = gradients(g_y_tokens.view({N * L, O}), w2d, want_gx, want_gw,
                            want_gw ? xs.tensors[0] : Tensor(), want_gw ? static_cast<float>(xs.scalars[0]) : 0.f, s.step);
  if (want_gx) out.grad_input = out.grad_input.view({N, L, I});
  record_.count_backward(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return out;
}

Gradients Hot::backward_conv_images(const SavedState& s, const Tensor& g_y_tokens, const Tensor& w2d_in,
                                    bool want_gx, bool want_gw, const ConvGeometry& cg) {
  // Plain copies, not a structured binding: lambdas below capture them (C++20 allows
  // capturing bindings, clang before 16 does not).
  const int64_t N = s.geom.B, L = s.geom.L, I = s.geom.I, O = s.geom.O;
  const int64_t M = N * L, O16 = round_up16(O);
  const HadamardKeep keep = keep_of(rows_);
  const int64_t Kr = cols_out_rows(M, keep), Kn = L / 16 * keep.r;  // HLA rows: total, per image
  const Tensor g2d = g_y_tokens.view({M, O});
  if (want_gx && lqs_ == Lqs::Undecided) run_lqs(g2d, "first backward", s.step);
  const GyQuant q = quantize_grad_output(backend::kCpuQuantize, settings_, keep, record_.id, s.step, next_micro(s.step),
                                         lqs_ == Lqs::PerToken, g2d, want_gx, want_gw);
  // This path runs on the CPU: host kernels called image by image from the loops below.
  const backend::Int8GemmHostKernels& int8 = backend::kCpuInt8GemmHost;
  const backend::HlaIm2colKernels& hla = backend::kCpuHlaIm2col;
  const int8_t* xq = s.tensors[0].data<int8_t>();
  const float s_in = static_cast<float>(s.scalars[0]);
  Gradients out;
  if (want_gx) {
    // Per image: columns (I, L) = W̃ᵀ (I, O16) · q_Gᵀ (O16, L), dequantised in the epilogue
    // (per-token scales are per column here), then col2im into dx.
    const int64_t C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3], chw = C * H * W;
    const Tensor w2d = backend::contiguous(w2d_in);
    check_f32(w2d, record_.name, "w");
    const WeightQuant wq = quantize_weight(backend::kCpuQuantize, settings_, record_.id, w2d);
    const float* rs = q.row_scale.defined() ? q.row_scale.data<float>() : nullptr;
    const float alpha = (rs ? 1.f : q.s_g) * wq.s_w / 16.f;
    Tensor dx = Tensor::zeros(cg.x_shape);
    float* pdx = dx.data<float>();
#pragma omp parallel
    {
      // Per-thread columns from the caching allocator (a std::vector here paid for fresh
      // pages and a zero fill of I·L floats on every call).
      Tensor cols_t = workspace({I, L}, DType::F32);
      float* cols = cols_t.data<float>();
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = 0; n < N; ++n) {
        int8.gemm_f32(true, true, I, L, O16, wq.wq.data<int8_t>(), I, q.gq.data<int8_t>() + n * L * O16, O16, cols, L,
                      nullptr, alpha, false, rs ? rs + n * L : nullptr);
        col2im(cols, C, H, W, cg.kH, cg.kW, cg.args, pdx + n * chw);
      }
    }
    out.grad_input = dx;  // (N, C, H, W): strategy_conv2d takes it as is
  }
  if (want_gw) {
    // X̂ᵀ (I, Kr): per image, HLA along L of the dequantised im2col columns, computed from the
    // int8 input without the column matrix, then rounded to nearest with the per-tensor
    // absmax scale: equal to the token path's BD(Ĥ)·tokens.
    Tensor xht = workspace({I, Kr}, DType::I8);
    const int qmax = quant::qmax_for_bits(kGwBits);
    const int64_t C = cg.x_shape[1], H = cg.x_shape[2], W = cg.x_shape[3], chw = C * H * W;
    int8_t* pxht = xht.data<int8_t>();
    float m = 0.f, inv = 0.f;
    if (hla.table_fits(W, cg.kW, cg.args)) {
      // One transform per distinct block (the kH kernel rows share them), kept for the
      // rounding pass: C·kW·H·Wo/16·r floats per image, kH·Ho/H times fewer than the columns'.
      const int64_t per = hla.table_size(C, H, W, cg.kW, cg.args, keep);
      Tensor table = workspace({N, per}, DType::F32);
      float* pt = table.data<float>();
#pragma omp parallel for reduction(max : m) schedule(dynamic, 1)
      for (int64_t n = 0; n < N; ++n)
        m = std::max(m, hla.table(xq + n * chw, s_in, C, H, W, cg.kH, cg.kW, cg.args, keep, pt + n * per));
      inv = quant::inv_scale_from_absmax(m, qmax);
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t n = 0; n < N; ++n)
        hla.table_quantize(pt + n * per, C, H, W, cg.kH, cg.kW, cg.args, keep, inv, qmax, pxht + n * Kn, Kr);
    } else {  // two transforms per block: absmax, then round-to-nearest
      const QuantParams px = qparams(kGwBits, false, record_.id, kGwId);
#pragma omp parallel for reduction(max : m) schedule(dynamic, 1)
      for (int64_t n = 0; n < N; ++n)
        m = std::max(m, hla.absmax(xq + n * chw, s_in, C, H, W, cg.kH, cg.kW, cg.args, keep));
      inv = quant::inv_scale_from_absmax(m, qmax);
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t n = 0; n < N; ++n)
        hla.quantize(xq + n * chw, s_in, C, H, W, cg.kH, cg.kW, cg.args, keep, inv, px, pxht + n * Kn, Kr);
    }
    // g_wᵀ (I, O) = X̂ᵀ (I, Kr) · q_Ĝ (Kr, O): both operands in their fast layouts.
    const float alpha = q.s_gh * quant::scale_from_absmax(m, qmax) / 16.f;
    Tensor gwt = workspace({I, O}, DType::F32);
    if (Kr == 0) gwt.zero_();
    for (int64_t k0 = 0; k0 < Kr; k0 += kMaxChunk)
      int8.gemm_f32(false, false, I, O, std::min(kMaxChunk, Kr - k0), xht.data<int8_t>() + k0, Kr,
                    q.ghq.data<int8_t>() + k0 * O, O, gwt.data<float>(), O, nullptr, alpha, k0 > 0, nullptr);
    out.grad_weight = backend::contiguous(gwt.transpose(0, 1));
  }
  return out;
}

// ---------------------------------------------------------------- accounting

double Hot::paper_backward_flops(const LayerGeometry& g) const {
  // Integer GEMM multiply-adds (2 FLOPs each) plus the Hadamard transforms' additions
  // (log2 16 = 4 per element): HT of g_y and w along O, HLA of x (forward) and g_y along L.
  const double L = static_cast<double>(g.L), I = static_cast<double>(g.I), O = static_cast<double>(g.O);
  const double O16 = static_cast<double>(round_up16(g.O)), rn = static_cast<double>(rows_.size()) / 16.0;
  return 2.0 * L * O16 * I + 2.0 * (L * rn) * O * I + 4.0 * (L * O16 + O16 * I + L * I + L * O);
}

double Hot::paper_frozen_backward_flops(const LayerGeometry& g) const {
  // The g_x path alone: the integer GEMM over the padded O and the transforms of g_y and w.
  const double L = static_cast<double>(g.L), I = static_cast<double>(g.I);
  const double O16 = static_cast<double>(round_up16(g.O));
  return 2.0 * L * O16 * I + 4.0 * (L * O16 + O16 * I);
}

double Hot::paper_saved_bytes_fp32(const LayerGeometry& g) const {
  // X̂ of the (im2col) tokens: L·r/16 rows of I int8 values (f32 when quantize is off).
  const double rn = static_cast<double>(rows_.size()) / 16.0;
  return static_cast<double>(g.L) * rn * static_cast<double>(g.I) * (settings_.quantize ? 1.0 : 4.0);
}

double Hot::paper_backward_bops(const LayerGeometry& g) const {
  // The reference counter (gbops_calculation.py), per sample, with its I·O·r/n term kept as
  // written; FP32 operations cost 1024 bit-ops, an INT8 MAC 64, an INT4 MAC 16.
  const double L = static_cast<double>(g.L), I = static_cast<double>(g.I), O = static_cast<double>(g.O);
  const double logn = 4.0, rn = static_cast<double>(rows_.size()) / 16.0;
  const double fp = L * O * logn + O * I * logn + L * O + O * I + L * I * logn + L * O * logn +
                    O * L * rn + I * O * rn + I * O + L * I;
  const double gx_mac = static_cast<double>(settings_.gx_bits * settings_.gx_bits);
  return fp * 1024.0 + O * (L * rn) * I * 64.0 + L * O * I * gx_mac;
}

StrategySummary Hot::summary() const {
  StrategySummary s = Strategy::summary();
  // Exact only once fallen back, or with every transform lossless (f32, all 16 rows).
  s.compressing = !record_.fell_back && (settings_.quantize || rows_.size() < 16);
  s.quantizer = lqs_name(lqs_);
  return s;
}

nlohmann::json Hot::report() const {
  nlohmann::json j = Strategy::report();  // "quantizer" from summary()
  j["hot"] = {{"lqs", {{"choice", lqs_name(lqs_)}, {"err_token", err_token_}, {"err_tensor", err_tensor_},
                       {"decided_by", lqs_how_}}},
              {"hla_rows", rows_},
              {"saved", last_conv_raw_ ? "int8 raw conv input" : settings_.quantize ? "int8 HLA tokens" : "f32 HLA tokens"},
              {"int8_gemm_kernel", backend::int8_gemm_kernels(device_).name()},
              {"paper_backward_gbops_per_sample", paper_backward_bops(record_.measured.last_geom) / 1e9}};
  return j;
}

}  // namespace lb::nn::backward
