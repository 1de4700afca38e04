// INSTANT backward strategy (Doan et al., ICLR 2026; docs/algorithms.md "INSTANT")
// Low-rank projections of the saved activation x and of the
// output gradient g_y, with bases from periodic calibration:
//
//   token axis   (n = L):  P (R_x, L), Q (R_y, L), shared by the batch.
//     forward  saves x̂_b = P x_b                           (R_x, I) per sample
//     backward g_w = Σ_b (P g_{y,b})ᵀ x̂_b                   (g_y projected with P: g_w ≈ g_yᵀ PᵀP x)
//              g_x,b = Qᵀ ((Q g_{y,b}) w)                   (g_x ≈ QᵀQ g_y w)
//   channel axis (n = I for x, n = O for g_y):  P (R_x, I), Q (R_y, O); X (BL, I), G (BL, O).
//     forward  saves X̂ = X Pᵀ                              (BL, R_x)
//     backward g_w = (Gᵀ X̂) P,   g_x = (G Qᵀ)(Q w)
//
// The axis is chosen per tensor ("auto": the smaller of L and the channel size, token on a
// tie, as the official code); g_w depends only on x's basis and g_x only on g_y's, so the two
// tensors may sit on different axes. The bias gradient stays exact (the caller's job).
//
// Calibration (see calibration.h for the loop contract): during begin_calibration() ..
// finish_calibration() the layer runs exactly and accumulates per-sample Gram matrices
// averaged over the batch (token axis x_b x_bᵀ, channel axis x_bᵀ x_b; likewise g_y), in
// gram_dtype, never keeping activations. finish_calibration() eigendecomposes them (syevd),
// picks the rank with the squared-eigenvalue energy rule
//   k = min{k : Σ_{i≤k} λ_i² ≥ ε Σ λ_i²},  R = min(k + p, n)   (or R = min(rank, n) if set)
// and sets P = U_Rᵀ / √η with η = Σ_{i≤R} λ_i² / Σ λ_i² (η = 1 without compensation; index
// R+1 with eta_offset_compat, as the reference code). Until the first calibration, after a
// calibration that saw zero energy, or for a call whose L does not match a token-axis basis,
// the layer runs the exact (vanilla) backward. Bases are saved with checkpoints (state_json).
//
// Settings (JSON, validated with path-named errors):
//   axis               "auto" | "token" | "channel"          default "auto"
//   epsilon            energy threshold ε in (0, 1]           default 0.95
//   oversampling       p ≥ 0 extra basis vectors              default 7 (the paper's text
//                      setting; its image configs use 0)
//   compensate         scale by 1/√η                          default true
//   eta_offset_compat  η from index R+1 (reference code)      default false
//   energy             "gram": Σλ² of the Gram, the paper's    default "gram"
//                      rule (Σ s⁴ in x's singular values s); "variance": Σλ = Σ s², the
//                      share of x's own squared norm (PCA's explained variance), for the
//                      rank rule and η alike
//   calib_every        N_t: calibrate every N_t steps         default 50 (paper images: 200)
//   calib_batches      N_c: passes per calibration            default 5
//   rank               fixed R_x = R_y (overrides ε and p)    default: energy rule
//   gram_dtype         "f32" | "f64" Gram/eigh precision      default "f32" (as the reference)
//   exact_when_no_gain run exact when the chosen ranks would   default true
//                      keep more than the exact backward does (a conv's exact state is its
//                      image, k² times smaller than its token view), or cost at least its
//                      FLOPs AND keep more than half of its bytes (e.g. near-full ranks from
//                      a flat spectrum): little to gain, accuracy to lose. false keeps any
//                      rank low-rank (lossless tests).
#pragma once
#include <functional>
#include <vector>

#include "lb/core/json_reader.h"
#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

class Instant : public Strategy, public Calibratable {
 public:
  enum class Axis { Auto, Token, Channel };
  struct Settings {
    Axis axis = Axis::Auto;
    double epsilon = 0.95;
    int64_t oversampling = 7;
    bool compensate = true;
    bool eta_offset_compat = false;
    bool variance_energy = false;  // energy "variance" (else "gram")
    int64_t calib_every = 50;
    int64_t calib_batches = 5;
    int64_t rank = 0;  // 0: energy rule
    DType gram_dtype = DType::F32;
    bool exact_when_no_gain = true;
  };
  // Reads the settings from a strategy spec (the factory has read "type").
  static Settings parse(JsonReader& r);

  // Rank selection from eigenvalues sorted descending (pure; exposed for tests).
  struct RankChoice {
    int64_t k = 0;      // energy-rule index (0 when degenerate)
    int64_t rank = 0;   // kept basis size R
    double eta = 1.0;   // compensation factor used (1 without compensation)
    double energy_fraction = 0.0;  // Σ_{i≤R} λ_i² / Σ λ_i²
    bool degenerate = false;       // zero or non-finite energy
  };
  static RankChoice choose_rank(const std::vector<double>& eigenvalues_desc, const Settings& s);

  // One tensor's basis: x's (P) or g_y's (Q).
  struct Basis {
    bool valid = false;      // a calibration has produced it
    bool token_axis = true;  // n = L (else n = channel size)
    int64_t n = 0;
    RankChoice choice;
    Tensor proj;  // (R, n) = U_Rᵀ/√η in gram_dtype, on the device of the layer's tensors
    std::vector<char> proj_bytes;  // proj's bytes, copied to the host once
    std::vector<double> eigenvalues;  // descending
  };
  // Builds a basis from a symmetric PSD Gram matrix (n, n) (pure; exposed for tests).
  static Basis basis_from_gram(const Tensor& gram, bool token_axis, const Settings& s);

  Instant();  // default settings
  explicit Instant(Settings s);
  std::string type() const override { return "instant"; }
  // A frozen layer's g_x = (G Qᵀ)(Q w), or Qᵀ((Q g_b) w) on the token axis: g_y's basis only,
  // nothing of x (its calibration observes g_y alone); exact until calibrated, and where the
  // rank would cost the exact product's FLOPs (exact_when_no_gain).
  bool compresses_gx() const override { return true; }
  // Runs on either device (src/backend/lowrank.h); on a GPU a Conv2d takes the token view
  // (Strategy::save_conv), the image-layout path below being CPU code.
  bool cpu_only(bool /*conv*/) const override { return false; }
  nlohmann::json hyperparams() const override;
  std::unique_ptr<Strategy> clone() const override { return std::make_unique<Instant>(settings_); }
  const Settings& settings() const { return settings_; }

  Calibratable* calibration() override { return this; }
  // True at step 0, every calib_every steps, and whenever no calibration has run yet.
  bool needs_calibration(int64_t step) const override;
  int64_t calibration_batches() const override { return settings_.calib_batches; }
  // Data-parallel: the Gram sums and batch counts summed over ranks (the bases then follow).
  void reduce_calibration(dist::ProcessGroup& group) override;
  bool reduces_calibration() const override { return true; }

  // Low-rank whenever both bases are usable (until then vanilla's figures):
  // 2(R_x + R_y)(I·O + L·I + L·O) FLOPs per sample (this includes the forward projection of
  // x), saved R_x·I·4 bytes per sample on the token axis, L·R_x·4 on the channel axis.
  double paper_backward_flops(const LayerGeometry& g) const override;
  double paper_frozen_backward_flops(const LayerGeometry& g) const override;
  double paper_saved_bytes_fp32(const LayerGeometry& g) const override;
  // ranks: both bases; calibration: its cost
  StrategySummary summary() const override;
  nlohmann::json report() const override;
  // Checkpoint state: both bases (projections, eigenvalues, ranks) and the calibration count,
  // so a resumed run keeps its bases until its next scheduled calibration.
  nlohmann::json state_json() const override;
  void load_state_json(const nlohmann::json& j) override;
  nlohmann::json accounting_state() const override;  // + fallback calls, calibration cost
  void load_accounting_state(const nlohmann::json& j) override;

  // Token axis with variable L (set_max_tokens): the bases span positions 0..max_L-1, the
  // Grams sum every batch zero-extended to max_L (padding positions beyond a batch's L add
  // nothing), and a batch of L ≤ max_L tokens projects with the bases' first L columns —
  // exactly what the zero-extended batch would give.
  // Padding-free calls (CallContext::sequences: x (1, N, I) holding S sequences back to back) are
  // the same per sequence: sequence b of L_b tokens projects with the first L_b columns
  // (x̂ (R_x, S, I)), its Gram adds to the leading L_b×L_b block, so a packed batch gives what
  // its padded form with zero rows at the padding would. They need set_max_tokens.
  void set_max_tokens(int64_t max_L) override { max_tokens_ = max_L; }

  const Basis& x_basis() const { return x_basis_; }
  const Basis& g_basis() const { return g_basis_; }
  int64_t calibrations() const { return calibrations_; }
  // Whether a call with geometry g would run low-rank (else exact).
  bool compresses(const LayerGeometry& g) const;
  // Whether a frozen call of geometry g runs its g_x low-rank (g_y's basis alone).
  bool compresses_frozen(const LayerGeometry& g) const;
  // Its multiply-adds per sample, as it would run low-rank.
  double frozen_lowrank_macs(const LayerGeometry& g) const;
  // Whether the current ranks, for geometry g, keep more than the exact backward, or cost at
  // least its FLOPs and keep more than half its bytes (the exact_when_no_gain test; false
  // without bases).
  bool no_gain(const LayerGeometry& g) const;

  // Calibration (the Calibratable side): Gram sums reset, fed, and turned into bases.
  void on_calibration_begin() override;
  void observe_input(const Tensor& x, const SequenceOffsets& sequences) override;
  void observe_grad_output(const Tensor& g_y, const SequenceOffsets& sequences, const StepContext& step) override;
  void on_calibration_end() override;

 protected:
  // A call sharing its input with sibling layers (CallContext::shared) keeps the projection
  // x̂ they share when their bases are equal byte for byte.
  SavedState save_impl(const Tensor& x, const Tensor& w, const CallContext& call) override;
  Gradients backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                          bool want_gw) override;
  SavedState save_frozen_impl(const LayerGeometry& g) override;
  // Conv2d (instant_conv.cpp): the (N, L, I) im2col token view is never materialised. On
  // the channel axis X̂ = im2col(x) Pᵀ is the convolution of x with P as R_x filters (kept as
  // (N, R_x, L)); on the token axis x̂ = P im2col(x_n)ᵀ per image (kept as (R_x, N, I)). The
  // backward works on g_y's image layout, image by image, with col2im for g_x.
  SavedState save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg,
                            const CallContext& call) override;
  Gradients backward_conv_image_impl(const SavedState& s, const Tensor& g_y, const Tensor& w2d, bool want_gx,
                                     bool want_gw, const ConvGeometry& cg) override;

 private:
  // Running sum of batch-averaged per-sample Gram matrices for one tensor.
  struct GramAccumulator {
    bool token_axis = true;
    int64_t n = 0;
    int64_t batches = 0;
    Tensor sum;  // (n, n) gram_dtype, upper triangle filled
  };
  bool pick_token_axis(int64_t L, int64_t C) const;
  // Adds the B samples of tokens t (B, L, C), or with `seq` the sequences of a padding-free
  // t (1, N, C).
  void accumulate(GramAccumulator& acc, const Tensor& t, const SequenceOffsets& seq, const char* what);
  // Adds B samples given transposed, as columns (C, L) each (a conv's im2col columns or its
  // output-gradient image): the same Gram without building the (B, L, C) token view.
  // columns(b) returns sample b's (C, L) matrix, contiguous, in gram_dtype.
  void accumulate_columns(GramAccumulator& acc, int64_t B, int64_t L, int64_t C,
                          const std::function<Tensor(int64_t)>& columns, const char* what);
  // Sets up acc on its first batch (axis choice, zeroed sum) and checks later ones agree;
  // returns whether the token axis is used.
  bool gram_axis(GramAccumulator& acc, int64_t L, int64_t C, const Shape& shape, const char* what,
                 bool packed, Device device);
  // Whether b serves a call of geometry g whose b-side channel size is C.
  bool basis_fits(const Basis& b, const LayerGeometry& g, int64_t C) const;
  // The low-rank path's per-sample FLOPs and fp32 bytes kept, for the current ranks.
  double lowrank_flops(const LayerGeometry& g) const;
  double lowrank_saved_bytes(const LayerGeometry& g) const;
  // b's projection for L tokens: (R, L), the first L columns on the token axis.
  Tensor projection(const Basis& b, int64_t L, DType dt) const;
  // Moves the bases to `device` (where they are used; a checkpoint loads them on the host).
  void place_bases(Device device);

  Device device_ = Device::cpu();  // where the Gram statistics live (the layer's tensors)
  int64_t max_tokens_ = 0;  // 0: the token axis needs one L for the whole run
  Settings settings_;
  Basis x_basis_, g_basis_;
  GramAccumulator x_acc_, g_acc_;
  int64_t calibrations_ = 0;
  int64_t generation_ = 0;  // bumped by every calibration; saved states carry it
  int64_t fallback_calls_ = 0;  // calls run exactly although calibrated (L mismatch, degenerate)
  // Calibration cost, reported separately from the training backward.
  double calib_flops_ = 0, calib_ms_ = 0;
  std::vector<nlohmann::json> rank_history_;
};

}  // namespace lb::nn::backward
