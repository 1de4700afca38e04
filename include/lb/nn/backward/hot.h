// HOT backward strategy (Kim et al., CVPR 2025; docs/algorithms.md "HOT")
// with real integer kernels.
//
// On the GEMM view x (B, L, I), w (O, I), g_y (B, L, O), M = B·L rows:
//  - g_x path (HQ): G̃ = g_y·BD(H_16) along O (zero-padded to O16), W̃ = BD(H_16)·w;
//    q_G = Q_sr(G̃) with per-token or per-tensor scale (LQS), q_W = Q_rtn(W̃) per-tensor
//    (absmax or SAWB); g_x = (q_G q_W)·s_G(row)·s_W / 16, an int8 GEMM with int32 sums.
//  - g_w path (internal HLA): Ĥ = r rows of H_16 (sequency 0..r-1 by default), applied along
//    the flattened token axis in blocks of 16 rows (M zero-padded to M16). Forward saves
//    X̂ = Q8_rtn(BD(Ĥ)·x): int8 (M16·r/16, I) + one fp32 scale (1/8 of fp32 x at r = 8).
//    Backward: Ĝ = Q8_sr(BD(Ĥ)·g_y); g_w = (Ĝᵀ X̂)·s_G·s_X / 16, contraction split into
//    chunks of ≤ 2^17 rows (int32 bound for 8-bit × 8-bit).
//  - LQS: once, on the first training batch (the calibration pass when the training loop
//    runs one, else the first backward), quantise G̃ per-token and per-tensor and keep
//    per-token if its L2 error is < 0.5 × the per-tensor error. Persisted via state_json().
//  - Conv2d: 1×1 stride-1 convs are Linear on the tokens. Other convs save the int8 raw
//    input (1/4 of fp32) when that is smaller than the int8 HLA of the im2col tokens;
//    backward dequantises, im2cols, applies HLA, requantises and runs the integer GEMM.
//  - Random numbers: tensor ids 0 (G̃), 1 (Ĝ), 2 (LQS trials) of the Philox stream keyed
//    by (the step context's seed and step, layer id, micro-batch) (lb/ops/
//    quantize_formulas.h); micro-batch = the layer's quantised backward calls so far in this
//    step, so gradient-accumulation micro-batches draw independently and a step's first
//    backward draws the same whatever ran before.
//
// Settings (JSON, all optional): gx_bits 4|8 (8; the paper's 4 buys speed only on INT4 tensor
// cores, which neither these CPUs nor Hopper have, and costs accuracy: see gx_bits in
// configs/README.md), hla_rank 1..16 (8, sequency basis),
// hla_basis "sequency"|"lbp_triangle" (the reference code's 10-row set), lqs (true),
// w_scale "absmax"|"sawb", quantize (true; false runs the same transforms in f32: with
// full_basis it equals vanilla), full_basis (false; true keeps all 16 rows), emulate (false;
// true runs scalar reference quantisers, dequantises and multiplies in f64: the oracle).
// Inputs must be f32.
#pragma once
#include <string>
#include <vector>

#include "lb/nn/backward/strategy.h"

namespace lb {
class JsonReader;
}

namespace lb::nn::backward {

struct HotSettings {
  int gx_bits = 8;
  int hla_rank = 8;
  std::string hla_basis = "sequency";
  bool lqs = true;
  std::string w_scale = "absmax";
  bool quantize = true;
  bool full_basis = false;
  bool emulate = false;

  static HotSettings from_json(JsonReader& r);  // validates, errors name the JSON path
  nlohmann::json to_json() const;
};

// Natural-order rows of H_16 kept by HLA, in output order (lowest sequency first).
std::vector<int> hla_rows(const HotSettings& s);

class Hot : public Strategy, public Calibratable {
 public:
  explicit Hot(HotSettings s = {});
  std::string type() const override { return "hot"; }
  // Runs on either device (src/backend/quantize.h, int8_gemm.h); on a GPU a Conv2d takes the
  // token view (Strategy::save_conv: its int8 raw-image path is CPU code), and the
  // f64 emulation oracle is CPU code.
  bool cpu_only(bool /*conv*/) const override { return settings_.emulate; }
  bool compresses_gx() const override { return true; }  // g_x from g_y and w alone
  nlohmann::json hyperparams() const override;
  std::unique_ptr<Strategy> clone() const override { return std::make_unique<Hot>(settings_); }
  const HotSettings& settings() const { return settings_; }

  // LQS runs on the first training batch (one calibration pass) unless decided already: the
  // Calibratable side observes that pass's output gradients.
  Calibratable* calibration() override { return this; }
  bool needs_calibration(int64_t step) const override;
  void observe_grad_output(const Tensor& g_y, const SequenceOffsets& sequences, const StepContext& step) override;
  void on_calibration_end() override {}

  double paper_backward_flops(const LayerGeometry& g) const override;
  double paper_frozen_backward_flops(const LayerGeometry& g) const override;
  double paper_saved_bytes_fp32(const LayerGeometry& g) const override;
  // The paper's bit-operation count (the reference counter's formula).
  double paper_backward_bops(const LayerGeometry& g) const;
  // quantizer: the LQS choice
  StrategySummary summary() const override;
  nlohmann::json report() const override;

  // {"lqs": {"choice": "per_token"|"per_tensor"|"undecided", "err_token", "err_tensor"}}
  nlohmann::json state_json() const override;
  void load_state_json(const nlohmann::json& j) override;

  enum class Lqs { Undecided, PerToken, PerTensor };
  Lqs lqs_choice() const { return lqs_; }
  // Decides LQS on this g_y (M, O) if still undecided (also used by the first backward);
  // its stochastic rounding draws from `step`'s stream.
  void run_lqs(const Tensor& g_y2d, const char* how, const StepContext& step = {});

 protected:
  SavedState save_impl(const Tensor& x, const Tensor& w, const CallContext& call) override;
  Gradients backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                          bool want_gw) override;
  SavedState save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg,
                            const CallContext& call) override;
  Gradients backward_conv_tokens_impl(const SavedState& s, const Tensor& g_y_tokens, const Tensor& w2d,
                                      bool want_gx, bool want_gw, const ConvGeometry& cg) override;

 private:
  // X̂ of token rows x2d (M, I): int8 (or f32 when quantize is off) plus its scale.
  void compress_tokens(const Tensor& x2d, SavedState& s) const;
  // g_x (M, I) from g_y (M, O) and w; g_w (O, I) from g_y and the saved X̂ with its scale.
  Gradients gradients(const Tensor& g2d, const Tensor& w, bool want_gx, bool want_gw,
                      const Tensor& xhat, float s_x, const StepContext& step);
  // Conv2d from the int8 raw input, image by image (16 | L): g_x as (N, C, H, W).
  Gradients backward_conv_images(const SavedState& s, const Tensor& g_y_tokens, const Tensor& w2d,
                                 bool want_gx, bool want_gw, const ConvGeometry& cg);

  // Index of this backward among the layer's quantised ones in `step` (its step and stream).
  int64_t next_micro(const StepContext& step);

  HotSettings settings_;
  std::vector<int> rows_;  // hla_rows(settings_)
  int64_t draw_step_ = -1, draw_micro_ = 0;
  uint64_t draw_stream_ = 0;
  Lqs lqs_ = Lqs::Undecided;
  double err_token_ = 0, err_tensor_ = 0;
  std::string lqs_how_;
  bool last_conv_raw_ = false;
  Device device_ = Device::cpu();  // where the last Linear call ran (for the report)
};

}  // namespace lb::nn::backward
