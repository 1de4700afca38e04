// INSTANT backward strategy (see instant.h): settings, calibration statistics, rank
// selection, the low-rank save/backward on both axes, and the accounting.
//
// Layouts (token axis) are chosen so every big product is one BLAS call with no copies:
//   x̂  (R_x, B, I): row r of sample b at x̂[r, b, :]; as a matrix (R_x·B, I)
//   Z1 (R_x, B, O) = P g_y per sample,  Z2 (R_y, B, O) = Q g_y per sample (one pass over g_y)
//   g_w = Z1ᵀ x̂ (contraction over R_x·B),  Ĝ_x = Z2 w (R_y·B, I),  g_x,b = Qᵀ Ĝ_x[:, b, :].
#include "lb/nn/backward/instant.h"


#include <algorithm>
#include <chrono>
#include <cmath>

#include "lb/autograd/grad_mode.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/linalg.h"
#include "lb/ops/shape_ops.h"
#include "src/backend/copy.h"
#include "src/backend/lowrank.h"

namespace lb::nn::backward {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const char* axis_name(Instant::Axis a) {
  switch (a) {
    case Instant::Axis::Token: return "token";
    case Instant::Axis::Channel: return "channel";
    default: return "auto";
  }
}

// Sequences per sample of a call: a padding-free call's sample holds them all, back to back.
double sequences_per_sample(const LayerGeometry& g) {
  return g.sequences > 0 ? static_cast<double>(g.sequences) : 1.0;
}
// The tokens a token-axis basis must span for a call: its sequences' longest.
int64_t token_span(const LayerGeometry& g) { return g.sequences > 0 ? g.longest : g.L; }

// A basis in the compute dtype of the call (bases live in gram_dtype).
Tensor as_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  NoGradGuard no_grad;
  return t.to(dtype);
}

// A basis's projection on `device` (bases loaded from a checkpoint start on the host).
void place(Instant::Basis& b, Device device) {
  if (b.proj.defined() && b.proj.device() != device) b.proj = b.proj.to(device);
}

// The host copy of a projection's bytes: the key the shared projection below compares.
std::vector<char> host_bytes(const Tensor& proj) {
  if (!proj.defined()) return {};
  const Tensor h = backend::contiguous(proj.to(Device::cpu()));
  const char* p = static_cast<const char*>(h.raw_data());
  return std::vector<char>(p, p + h.nbytes());
}

// The key under which sibling layers reading the same x (BERT's query, key and value, through
// CallContext::shared) share x̂: they calibrate on the same inputs, so their x bases are
// normally bit-identical, and then so is x̂; it is computed and kept once. The key holds the
// basis bytes themselves (through their host copy, so a device basis is never read back),
// the axis, dtype and projection shape.
std::string projection_key(const Tensor& x, const Tensor& P, const Instant::Basis& basis) {
  std::string key = "instant x̂ ";
  key += basis.token_axis ? "token " : "channel ";
  key += dtype_name(x.dtype());
  // Appended piece by piece: GCC 12 takes `" " + shape_str(...)` for an overlapping copy
  // (a false -Wrestrict once this is inlined).
  for (const std::string& part : {shape_str(x.shape()), shape_str(P.shape())}) {
    key += ' ';
    key += part;
  }
  key += ' ';
  key.append(basis.proj_bytes.data(), basis.proj_bytes.size());
  return key;
}

nlohmann::json basis_json(const Instant::Basis& b) {
  if (!b.valid) return {{"valid", false}};
  return {{"valid", true},
          {"axis", b.token_axis ? "token" : "channel"},
          {"n", b.n},
          {"rank", b.choice.rank},
          {"k", b.choice.k},
          {"eta", b.choice.eta},
          {"energy_fraction", b.choice.energy_fraction},
          {"degenerate", b.choice.degenerate}};
}

nlohmann::json basis_state(const Instant::Basis& b) {
  nlohmann::json j = basis_json(b);
  if (!b.valid) return j;
  j["eigenvalues"] = b.eigenvalues;
  j["proj"] = b.proj.defined() ? b.proj.to_double_vector() : std::vector<double>{};
  return j;
}

std::vector<double> number_list(const nlohmann::json& v, const std::string& path, size_t size) {
  LB_CHECK(v.is_array() && v.size() == size, path, ": expected a list of ", size, " numbers");
  std::vector<double> out;
  out.reserve(size);
  for (size_t i = 0; i < size; ++i) {
    LB_CHECK(v[i].is_number(), path, "[", i, "]: expected a number, got ", v[i].dump());
    out.push_back(v[i].get<double>());
  }
  return out;
}

Instant::Basis basis_from_state(const nlohmann::json& j, const std::string& path, DType dtype) {
  JsonReader r(j, path);
  Instant::Basis b;
  b.valid = r.boolean("valid", false);
  if (!b.valid) {
    r.finish();
    return b;
  }
  b.token_axis = r.choice("axis", "token", {"token", "channel"}) == "token";
  b.n = r.integer("n", 0, 1, int64_t{1} << 31);
  b.choice.degenerate = r.boolean("degenerate", false);
  b.choice.rank = r.integer("rank", 0, 0, b.n);
  b.choice.k = r.integer("k", 0, 0, b.n);
  b.choice.eta = r.number("eta", 1.0, 0.0, 1.0);
  b.choice.energy_fraction = r.number("energy_fraction", 0.0, 0.0, 1.0);
  b.eigenvalues = number_list(r.raw("eigenvalues"), path + ".eigenvalues", static_cast<size_t>(b.n));
  const int64_t R = b.choice.degenerate ? 0 : b.choice.rank;
  LB_CHECK(b.choice.degenerate || (R > 0 && b.choice.eta > 0), path, ": a usable basis needs rank >= 1 and eta > 0");
  const std::vector<double> p = number_list(r.raw("proj"), path + ".proj", static_cast<size_t>(R * b.n));
  r.finish();
  if (R > 0) {
    b.proj = Tensor::empty({R, b.n}, dtype);
    detail::dispatch_float(dtype, "instant state", [&](auto tag) {
      using T = decltype(tag);
      T* d = b.proj.data<T>();
      for (size_t i = 0; i < p.size(); ++i) d[i] = static_cast<T>(p[i]);
    });
    b.proj_bytes = host_bytes(b.proj);
  }
  return b;
}

}  // namespace

// ---------------------------------------------------------------- settings

Instant::Settings Instant::parse(JsonReader& r) {
  Settings s;
  const std::string axis = r.choice("axis", "auto", {"auto", "token", "channel"});
  s.axis = axis == "token" ? Axis::Token : axis == "channel" ? Axis::Channel : Axis::Auto;
  s.epsilon = r.number("epsilon", s.epsilon, 0.0, 1.0);
  LB_CHECK(s.epsilon > 0.0, r.path(), ".epsilon: must be in (0, 1], got 0");
  s.oversampling = r.integer("oversampling", s.oversampling, 0, 1 << 20);
  s.compensate = r.boolean("compensate", s.compensate);
  s.eta_offset_compat = r.boolean("eta_offset_compat", s.eta_offset_compat);
  s.variance_energy = r.choice("energy", "gram", {"gram", "variance"}) == "variance";
  s.calib_every = r.integer("calib_every", s.calib_every, 1, int64_t{1} << 40);
  s.calib_batches = r.integer("calib_batches", s.calib_batches, 1, 1 << 20);
  if (r.has("rank")) s.rank = r.integer("rank", 0, 1, 1 << 20);
  s.gram_dtype = r.choice("gram_dtype", "f32", {"f32", "f64"}) == "f64" ? DType::F64 : DType::F32;
  s.exact_when_no_gain = r.boolean("exact_when_no_gain", s.exact_when_no_gain);
  return s;
}

Instant::Instant() : settings_() {}
Instant::Instant(Settings s) : settings_(s) {}

nlohmann::json Instant::hyperparams() const {
  nlohmann::json j = {{"type", "instant"},
                      {"axis", axis_name(settings_.axis)},
                      {"epsilon", settings_.epsilon},
                      {"oversampling", settings_.oversampling},
                      {"compensate", settings_.compensate},
                      {"eta_offset_compat", settings_.eta_offset_compat},
                      {"energy", settings_.variance_energy ? "variance" : "gram"},
                      {"calib_every", settings_.calib_every},
                      {"calib_batches", settings_.calib_batches},
                      {"gram_dtype", settings_.gram_dtype == DType::F64 ? "f64" : "f32"},
                      {"exact_when_no_gain", settings_.exact_when_no_gain}};
  if (settings_.rank > 0) j["rank"] = settings_.rank;
  return j;
}

bool Instant::needs_calibration(int64_t step) const {
  return calibrations_ == 0 || step % settings_.calib_every == 0;
}

// ---------------------------------------------------------------- rank selection

Instant::RankChoice Instant::choose_rank(const std::vector<double>& ev, const Settings& s) {
  RankChoice c;
  const int64_t n = static_cast<int64_t>(ev.size());
  // Energy of the Gram matrix = Σ λ² (its squared Frobenius norm): notes §2.3; or, with
  // energy "variance", Σ λ (x's squared norm). Rounding may leave tiny negative λ: clamp.
  std::vector<double> cum(static_cast<size_t>(n) + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    cum[i + 1] = cum[i] + (s.variance_energy ? std::max(ev[i], 0.0) : ev[i] * ev[i]);
  const double E = cum[n];
  if (n == 0 || !(E > 0.0) || !std::isfinite(E)) {
    c.degenerate = true;
    return c;
  }
  c.k = n;  // rounding may keep the sum just under ε·E at ε = 1
  for (int64_t k = 1; k <= n; ++k)
    if (cum[k] >= s.epsilon * E) {
      c.k = k;
      break;
    }
  c.rank = s.rank > 0 ? std::min(s.rank, n) : std::min(c.k + s.oversampling, n);
  c.energy_fraction = cum[c.rank] / E;
  if (!s.compensate)
    c.eta = 1.0;
  else if (s.eta_offset_compat)  // the reference code reads the cumulative energy one further
    c.eta = c.rank < n ? cum[c.rank + 1] / E : 1.0;
  else
    c.eta = c.energy_fraction;
  return c;
}

Instant::Basis Instant::basis_from_gram(const Tensor& gram, bool token_axis, const Settings& s) {
  LB_CHECK(gram.dim() == 2 && gram.size(0) == gram.size(1), "instant: Gram matrix must be square, got ",
           shape_str(gram.shape()));
  Basis b;
  b.valid = true;
  b.token_axis = token_axis;
  b.n = gram.size(0);
  const std::vector<double> g = gram.to_double_vector();
  bool finite = true;
  for (double v : g) finite = finite && std::isfinite(v);
  if (!finite) {  // a diverged run: stay exact rather than fail inside LAPACK
    b.choice.degenerate = true;
    return b;
  }
  const EighResult e = eigh(gram);  // ascending (LAPACK order)
  const std::vector<double> asc = e.eigenvalues.to_double_vector();
  b.eigenvalues.assign(asc.rbegin(), asc.rend());
  b.choice = choose_rank(b.eigenvalues, s);
  if (b.choice.degenerate) return b;
  // Rows: the leading eigenvectors (columns n-1, n-2, … of V), scaled by 1/√η; on the
  // Gram's device.
  b.proj = backend::lowrank_kernels(gram.device()).leading_rows(e.eigenvectors, b.choice.rank,
                                                                 1.0 / std::sqrt(b.choice.eta));
  b.proj_bytes = host_bytes(b.proj);
  return b;
}

// ---------------------------------------------------------------- calibration

bool Instant::pick_token_axis(int64_t L, int64_t C) const {
  if (settings_.axis == Axis::Token) return true;
  if (settings_.axis == Axis::Channel) return false;
  return L <= C;  // official code: channel axis only when C < L
}

void Instant::on_calibration_begin() {
  x_acc_ = GramAccumulator();
  g_acc_ = GramAccumulator();
}

bool Instant::gram_axis(GramAccumulator& acc, int64_t L, int64_t C, const Shape& shape,
                        const char* what, bool packed, Device device) {
  const bool token = acc.batches > 0 ? acc.token_axis : pick_token_axis(max_tokens_ > 0 ? max_tokens_ : L, C);
  LB_CHECK(!token || !packed || max_tokens_ > 0, "instant (", record_.name, "): a padding-free ", what,
           " batch (", shape_str(shape), ") on the token axis needs the longest sequence the bases "
           "must span. HINT: call set_max_tokens(max_seq_len) (the trainer does), or set \"axis\": "
           "\"channel\"");
  const int64_t n = token ? (max_tokens_ > 0 ? max_tokens_ : L) : C;
  LB_CHECK(!token || L <= n, "instant (", record_.name, "): a ", what, " batch of ", L,
           " tokens is longer than the ", n, " the token-axis bases span (", shape_str(shape), ")");
  if (acc.batches == 0) {
    acc.token_axis = token;
    acc.n = n;
    acc.sum = Tensor::zeros({n, n}, settings_.gram_dtype, device, MemTag::Workspace);
    device_ = device;
  }
  LB_CHECK(acc.n == n, "instant (", record_.name, "): calibration batches disagree on the ", what,
           " ", token ? "token" : "channel", " axis size (", acc.n, " then ", n, " from ",
           shape_str(shape), "). HINT: the token axis needs a fixed sequence length; pad to "
           "max_seq_len or set \"axis\": \"channel\"");
  return token;
}

void Instant::accumulate(GramAccumulator& acc, const Tensor& t, const SequenceOffsets& seq,
                         const char* what) {
  const auto t0 = Clock::now();
  // Padded: B samples of L tokens. Packed: the (1, N, C) call's sequences are the samples.
  const int64_t B = seq ? static_cast<int64_t>(seq->size()) - 1 : t.size(0), C = t.size(2);
  int64_t L = t.size(1);
  if (seq) {
    L = 0;
    for (int64_t b = 0; b < B; ++b) L = std::max(L, (*seq)[b + 1] - (*seq)[b]);
  }
  const bool token = gram_axis(acc, L, C, t.shape(), what, seq != nullptr, t.device());
  const int64_t n = token ? acc.n : C;
  const int64_t rows = t.size(0) * t.size(1);
  if (B == 0 || rows == 0 || C == 0) return;
  NoGradGuard no_grad;
  const Tensor tc = backend::contiguous(as_dtype(t, settings_.gram_dtype));
  // Per-sample Grams averaged over the batch; on the token axis x_b x_bᵀ goes into the leading
  // L_b×L_b block (a shorter sample is its zero-extension), on the channel axis Σ_b x_bᵀ x_b.
  backend::lowrank_kernels(t.device()).gram_add(acc.sum, tc, seq.get(), token, 1.0 / static_cast<double>(B));
  ++acc.batches;
  calib_flops_ += token ? static_cast<double>(n) * static_cast<double>(n + 1) * static_cast<double>(C) * static_cast<double>(B)
                        : static_cast<double>(n) * static_cast<double>(n + 1) * static_cast<double>(rows);
  calib_ms_ += ms_since(t0);
}

void Instant::accumulate_columns(GramAccumulator& acc, int64_t B, int64_t L, int64_t C,
                                 const std::function<Tensor(int64_t)>& columns, const char* what) {
  const auto t0 = Clock::now();
  const bool token = gram_axis(acc, L, C, {B, C, L}, what, false, Device::cpu());
  const int64_t n = token ? L : C;
  if (B == 0 || L == 0 || C == 0) return;
  NoGradGuard no_grad;
  detail::dispatch_float(settings_.gram_dtype, "instant calibration", [&](auto tag) {
    using T = decltype(tag);
    T* s = acc.sum.data<T>();
    const auto& host = backend::lowrank_host_kernels<T>();
    const double alpha = 1.0 / static_cast<double>(B);
    if (token) {  // x_b x_bᵀ = colsᵀ cols (L, L), one image at a time
      for (int64_t b = 0; b < B; ++b) host.gram_acc(true, L, C, alpha, columns(b).data<T>(), L, s, 0);
      return;
    }
    // Channel axis: Σ_b cols_b cols_bᵀ (C, C) = W Wᵀ with W the images' columns side by side.
    // Every gram_acc call rewrites the (C, C) triangle, so images go in chunks at least ~2048
    // columns wide (a 4×4 stage has L = 16 and C up to 4608), within ~64 MiB of W.
    const int64_t by_width = (2048 + L - 1) / L;
    const int64_t by_bytes = std::max<int64_t>(1, (int64_t{64} << 20) / (C * L * static_cast<int64_t>(sizeof(T))));
    const int64_t nb = std::clamp<int64_t>(std::min(by_width, by_bytes), 1, B);
    Tensor wide = nb > 1 ? Tensor::empty({C, nb * L}, settings_.gram_dtype, Device::cpu(), MemTag::Workspace)
                         : Tensor();
    for (int64_t b0 = 0; b0 < B; b0 += nb) {
      const int64_t m = std::min(nb, B - b0);
      if (nb == 1) {
        host.gram_acc(false, C, L, alpha, columns(b0).data<T>(), L, s, 0);
        continue;
      }
      T* pw = wide.data<T>();
      for (int64_t k = 0; k < m; ++k) {
        const Tensor cols = columns(b0 + k);
        const T* pc = cols.data<T>();
        for (int64_t r = 0; r < C; ++r)
          std::copy(pc + r * L, pc + (r + 1) * L, pw + r * m * L + k * L);
      }
      host.gram_acc(false, C, m * L, alpha, pw, m * L, s, 0);
    }
  });
  ++acc.batches;
  calib_flops_ += static_cast<double>(B) * static_cast<double>(n) * static_cast<double>(n + 1) *
                  static_cast<double>(token ? C : L);
  calib_ms_ += ms_since(t0);
}

void Instant::observe_input(const Tensor& x, const SequenceOffsets& seq) { accumulate(x_acc_, x, seq, "input"); }
void Instant::observe_grad_output(const Tensor& g_y, const SequenceOffsets& seq, const StepContext&) {
  accumulate(g_acc_, g_y, seq, "output-gradient");
}

void Instant::reduce_calibration(dist::ProcessGroup& group) {
  for (auto* acc : {&x_acc_, &g_acc_}) {
    const std::string what = std::string(acc == &x_acc_ ? "input" : "output-gradient") + " Gram of " + record_.name;
    // A rank that saw no batch of this layer still takes part, with zeros of the others' shape.
    std::vector<double> head{static_cast<double>(acc->batches), acc->sum.defined() ? static_cast<double>(acc->n) : 0.0,
                             acc->sum.defined() ? 1.0 : 0.0, acc->token_axis ? 1.0 : 0.0};
    group.all_reduce_sum(head, what + " (sizes)");
    if (head[2] == 0) continue;  // no rank accumulated anything
    if (!acc->sum.defined()) {
      acc->n = static_cast<int64_t>(head[1] / head[2]);
      acc->token_axis = head[3] > 0;
      acc->sum = Tensor::zeros({acc->n, acc->n}, settings_.gram_dtype, device_, MemTag::Workspace);
    }
    LB_CHECK(head[1] == static_cast<double>(acc->n) * head[2], "rank ", group.rank(), ": ", what,
             ": the ranks' Gram sizes differ");
    acc->batches = static_cast<int64_t>(head[0]);
    group.all_reduce_sum(acc->sum, what);
  }
}

void Instant::on_calibration_end() {
  const auto t0 = Clock::now();
  bool any = false;
  for (const auto& pair : {std::pair{&x_acc_, &x_basis_}, std::pair{&g_acc_, &g_basis_}}) {
    auto* acc = pair.first;  // not a structured binding: the lambda below captures it (clang 14)
    auto* basis = pair.second;
    if (acc->batches == 0) continue;  // the layer was not used: keep what it had
    any = true;
    const int64_t n = acc->n;
    Tensor gram = acc->sum;
    backend::lowrank_kernels(gram.device()).gram_finish(gram, acc->batches);  // the mean, symmetric
    *basis = basis_from_gram(gram, acc->token_axis, settings_);
    calib_flops_ += 14.0 / 3.0 * std::pow(static_cast<double>(n), 3);  // syevd, estimate
    *acc = GramAccumulator();
  }
  if (!any) return;
  ++calibrations_;
  ++generation_;
  calib_ms_ += ms_since(t0);
  rank_history_.push_back({{"calibration", calibrations_},
                           {"x_rank", x_basis_.choice.rank},
                           {"g_y_rank", g_basis_.choice.rank},
                           {"x_k", x_basis_.choice.k},
                           {"g_y_k", g_basis_.choice.k}});
}

// ---------------------------------------------------------------- forward / backward

bool Instant::basis_fits(const Basis& b, const LayerGeometry& g, int64_t C) const {
  if (!b.valid || b.choice.degenerate) return false;
  if (!b.token_axis) return b.n == C;
  const int64_t L = token_span(g);
  return max_tokens_ > 0 || g.sequences > 0 ? L <= b.n : L == b.n;
}

Tensor Instant::projection(const Basis& b, int64_t L, DType dt) const {
  const Tensor p = as_dtype(b.proj, dt);
  if (!b.token_axis || L == b.n) return backend::contiguous(p);
  return backend::contiguous(p.slice(1, 0, L));
}

void Instant::place_bases(Device device) {
  place(x_basis_, device);
  place(g_basis_, device);
}

bool Instant::compresses(const LayerGeometry& g) const {
  return basis_fits(x_basis_, g, g.I) && basis_fits(g_basis_, g, g.O) &&
         !(settings_.exact_when_no_gain && no_gain(g));
}

// Per sample: projecting g_y (R L O), the product with w (R I O per sequence on the token
// axis, once per batch on the channel axis) and expanding (R L I), in multiply-adds.
double Instant::frozen_lowrank_macs(const LayerGeometry& g) const {
  const double L = static_cast<double>(g.L), I = static_cast<double>(g.I), O = static_cast<double>(g.O);
  const double per_w = g_basis_.token_axis ? sequences_per_sample(g) : 1.0 / static_cast<double>(std::max<int64_t>(g.B, 1));
  return static_cast<double>(g_basis_.choice.rank) * (per_w * I * O + L * I + L * O);
}

bool Instant::compresses_frozen(const LayerGeometry& g) const {
  if (!basis_fits(g_basis_, g, g.O)) return false;
  if (!settings_.exact_when_no_gain) return true;
  // Against g_y w (L I O).
  return frozen_lowrank_macs(g) < static_cast<double>(g.L) * static_cast<double>(g.I) * static_cast<double>(g.O);
}

double Instant::paper_frozen_backward_flops(const LayerGeometry& g) const {
  return compresses_frozen(g) ? 2.0 * frozen_lowrank_macs(g) : Strategy::paper_frozen_backward_flops(g);
}

SavedState Instant::save_frozen_impl(const LayerGeometry& g) {
  SavedState s;
  if (!compresses_frozen(g)) {
    if (calibrations_ > 0) ++fallback_calls_;
    s.exact = true;
    return s;
  }
  s.scalars = {static_cast<double>(generation_)};
  return s;
}

bool Instant::no_gain(const LayerGeometry& g) const {
  if (!basis_fits(x_basis_, g, g.I) || !basis_fits(g_basis_, g, g.O)) return false;
  // Per sample: the paper's FLOP count (paper_backward_flops) and the elements each state
  // keeps (a convolution's exact state is its image, not the k² times larger token view).
  const double L = static_cast<double>(g.L), I = static_cast<double>(g.I), O = static_cast<double>(g.O);
  const double exact = g.exact_saved > 0 ? static_cast<double>(g.exact_saved) : L * I;
  const double kept = lowrank_saved_bytes(g) / 4.0;
  // Keeping more than exact does is no gain whatever the FLOPs (e.g. a 3×3 conv's token axis
  // keeps R·C·9 per image against C·Ho·Wo: more from R > Ho·Wo/9, as on ResNet-18's last stages).
  if (kept > exact) return true;
  // Saving less than half the bytes is not worth a costlier and approximate backward.
  return lowrank_flops(g) >= 4.0 * L * I * O && 2.0 * kept > exact;
}

SavedState Instant::save_impl(const Tensor& x, const Tensor& w, const CallContext& call) {
  // record_.measured.last_geom is this call's (Strategy::save), with the packed sequences if any.
  const int64_t B = x.size(0), L = x.size(1), I = x.size(2);
  if (!compresses(record_.measured.last_geom)) {
    if (calibrations_ > 0) ++fallback_calls_;
    return save_exact(x, w);
  }
  const bool packed = record_.measured.last_geom.sequences > 0;
  place_bases(x.device());
  const Tensor P = projection(x_basis_, packed ? x_basis_.n : L, x.dtype());
  const int64_t Rx = P.size(0);
  SavedState s;
  s.scalars = {static_cast<double>(generation_)};
  const SequenceOffsets& seq = call.sequences;
  const auto project = [&] {
    if (x_basis_.token_axis) {
      // x̂ (R_x, S, I), x̂[:, b, :] = P[:, :L_b] x_b per sample (or per sequence when packed)
      Tensor xh = Tensor::empty({Rx, packed ? record_.measured.last_geom.sequences : B, I}, x.dtype(), x.device());
      Tensor no_bias;
      backend::lowrank_kernels(x.device()).project(P, x, seq.get(), xh, no_bias);
      return xh;
    }
    NoGradGuard no_grad;  // X̂ = X Pᵀ (B·L, R_x)
    return matmul(x.view({B * L, I}), P, false, true);
  };
  s.tensors = {call.shared ? call.shared->get_or_compute(projection_key(x, P, x_basis_), project) : project()};
  return s;
}

Gradients Instant::backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w,
                                 bool want_gx, bool want_gw) {
  LB_CHECK(!s.scalars.empty() && static_cast<int64_t>(s.scalars[0]) == generation_,
           "instant (", record_.name, "): the bases changed between this forward and its backward. "
           "HINT: run calibration only between optimizer steps, after every pending backward");
  // Plain copies, not a structured binding: lambdas below capture them (C++20 allows
  // capturing bindings, clang before 16 does not).
  const int64_t B = s.geom.B, L = s.geom.L, I = s.geom.I, O = s.geom.O;
  LB_CHECK(g_y.is_contiguous() && g_y.dim() == 3 && g_y.size(0) == B && g_y.size(1) == L &&
               g_y.size(2) == O,
           "instant (", record_.name, "): g_y must be a contiguous (", B, ", ", L, ", ", O,
           ") tensor, got ", g_y.str());
  const DType dt = g_y.dtype();
  // Packed (s.sequences): the token-axis bases project each of the S sequences with their
  // first L_b columns, so the projected samples are the sequences (NS of them).
  const bool packed = s.sequences != nullptr;
  const int64_t NS = packed ? s.geom.sequences : B;
  place_bases(g_y.device());
  // A frozen layer's state (save_frozen_impl) wants g_x alone: x's basis may not exist.
  const Tensor P = want_gw ? projection(x_basis_, packed ? x_basis_.n : L, dt) : Tensor();
  const Tensor Q = want_gx ? projection(g_basis_, packed ? g_basis_.n : L, dt) : Tensor();
  const int64_t Rx = want_gw ? P.size(0) : 0, Ry = want_gx ? Q.size(0) : 0;
  const Tensor xh = want_gw ? s.tensors.at(0) : Tensor();
  const Tensor g2 = g_y.view({B * L, O});  // contiguous (strategy contract)
  Gradients out;

  // Token-axis projections of g_y: Z1 = P g_y (for g_w) and Z2 = Q g_y (for g_x), stacked as
  // one [P; Q] projection so g_y streams through memory once.
  const bool need_z1 = want_gw && x_basis_.token_axis;
  const bool need_z2 = want_gx && g_basis_.token_axis;
  Tensor z1, z2;
  if (need_z1 || need_z2) {
    const int64_t R1 = need_z1 ? Rx : 0, R2 = need_z2 ? Ry : 0;
    // Both token-axis bases span the same positions (L, or max_tokens_ when packed). The
    // projected rows (R1 + R2, NS, O): Z1's rows first, so Z1 and Z2 are contiguous slices.
    const Tensor stacked = need_z1 && need_z2 ? concat({P, Q}, 0) : need_z1 ? P : Q;
    Tensor z = Tensor::empty({R1 + R2, NS, O}, dt, g_y.device(), MemTag::Workspace);
    // Σ_l g_y per sample from the same pass, reduced over the batch: the exact bias gradient.
    out.grad_bias = Tensor::empty({O}, dt, g_y.device());
    backend::lowrank_kernels(g_y.device()).project(stacked, g_y, s.sequences.get(), z, out.grad_bias);
    if (need_z1) z1 = z.slice(0, 0, R1).view({Rx * NS, O});
    if (need_z2) z2 = z.slice(0, R1, R1 + R2).view({Ry * NS, O});
  }

  if (want_gw) {
    if (x_basis_.token_axis)  // g_w = Σ_b (P g_b)ᵀ (P x_b): one GEMM contracting over R_x·B
      out.grad_weight = matmul(z1, xh.view({Rx * NS, I}), true, false);
    else  // g_w = (Gᵀ X̂) P
      out.grad_weight = matmul(matmul(g2, xh, true, false), P);
  }
  if (want_gx) {
    if (g_basis_.token_axis) {  // Ĝ_x = (Q g_b) w for all b at once, then g_x,b = Qᵀ Ĝ_x,b
      const Tensor gxh = matmul(z2, w);  // (R_y·B, I)
      Tensor gx = Tensor::empty({B, L, I}, dt, g_y.device());
      backend::lowrank_kernels(g_y.device()).expand(Q, gxh.view({Ry, NS, I}), s.sequences.get(), gx);
      out.grad_input = gx;
    } else {  // g_x = (G Qᵀ)(Q w)
      out.grad_input = matmul(matmul(g2, Q, false, true), matmul(Q, w)).view({B, L, I});
    }
  }
  return out;
}

// ---------------------------------------------------------------- accounting

// Per sample: projecting x (R_x L I) and g_y (R L O), the g_w and g_x products. On the token
// axis every sequence has its own R×I / R×O projected rows, so the (I·O) products happen
// once per sequence; on the channel axis once per sample.
double Instant::lowrank_flops(const LayerGeometry& g) const {
  const double L = static_cast<double>(g.L), I = static_cast<double>(g.I), O = static_cast<double>(g.O);
  const double s = sequences_per_sample(g);
  auto term = [&](const Basis& b) {
    return static_cast<double>(b.choice.rank) * ((b.token_axis ? s : 1.0) * I * O + L * I + L * O);
  };
  return 2.0 * (term(x_basis_) + term(g_basis_));
}

double Instant::lowrank_saved_bytes(const LayerGeometry& g) const {
  const double Rx = static_cast<double>(x_basis_.choice.rank);
  return 4.0 * Rx * (x_basis_.token_axis ? sequences_per_sample(g) * static_cast<double>(g.I) : static_cast<double>(g.L));
}

double Instant::paper_backward_flops(const LayerGeometry& g) const {
  return compresses(g) ? lowrank_flops(g) : Strategy::paper_backward_flops(g);
}

double Instant::paper_saved_bytes_fp32(const LayerGeometry& g) const {
  return compresses(g) ? lowrank_saved_bytes(g) : Strategy::paper_saved_bytes_fp32(g);
}

nlohmann::json Instant::state_json() const {
  return {{"calibrations", calibrations_},
          {"x", basis_state(x_basis_)},
          {"g_y", basis_state(g_basis_)},
          {"rank_history", rank_history_}};
}

void Instant::load_state_json(const nlohmann::json& j) {
  const std::string path = "instant state (" + record_.name + ")";
  JsonReader r(j, path);
  const int64_t calibrations = r.integer("calibrations", 0, 0, int64_t{1} << 40);
  Basis x = basis_from_state(r.has("x") ? r.raw("x") : nlohmann::json::object(), path + ".x", settings_.gram_dtype);
  Basis g = basis_from_state(r.has("g_y") ? r.raw("g_y") : nlohmann::json::object(), path + ".g_y", settings_.gram_dtype);
  const nlohmann::json& hist = r.raw("rank_history");
  LB_CHECK(hist.is_null() || hist.is_array(), path, ".rank_history: expected a list");
  r.finish();
  x_basis_ = std::move(x);
  g_basis_ = std::move(g);
  calibrations_ = calibrations;
  rank_history_ = hist.is_array() ? hist.get<std::vector<nlohmann::json>>() : std::vector<nlohmann::json>{};
  ++generation_;  // states saved before the load must not meet these bases
}

nlohmann::json Instant::accounting_state() const {
  nlohmann::json j = Strategy::accounting_state();
  j["fallback_calls"] = fallback_calls_;
  j["calibration_flops"] = calib_flops_;
  j["calibration_ms"] = calib_ms_;
  return j;
}

void Instant::load_accounting_state(const nlohmann::json& j) {
  Strategy::load_accounting_state(j);
  JsonReader r(j, "accounting (" + record_.name + ")");
  fallback_calls_ = r.integer("fallback_calls", 0, 0, int64_t{1} << 62);
  calib_flops_ = r.number("calibration_flops", 0, 0, 1e300);
  calib_ms_ = r.number("calibration_ms", 0, 0, 1e300);
}

StrategySummary Instant::summary() const {
  StrategySummary s = Strategy::summary();
  s.compressing = !record_.fell_back && (record_.frozen ? compresses_frozen(record_.measured.last_geom) : compresses(record_.measured.last_geom));
  // Through basis_json: the same figures as report()["instant"] and the checkpoint state.
  s.ranks = StrategySummary::Ranks{StrategySummary::OperandRank::from_json(basis_json(x_basis_)),
                                   StrategySummary::OperandRank::from_json(basis_json(g_basis_))};
  s.calibration = StrategySummary::CalibrationCost{calibrations_, calib_flops_, calib_ms_};
  return s;
}

nlohmann::json Instant::report() const {
  nlohmann::json j = Strategy::report();  // "ranks", "calibration" from summary()
  j["instant"] = {{"calibrations", calibrations_},
                  {"compressing", record_.frozen ? compresses_frozen(record_.measured.last_geom) : compresses(record_.measured.last_geom)},
                  {"frozen", record_.frozen},
                  {"no_gain", no_gain(record_.measured.last_geom)},
                  {"x", basis_json(x_basis_)},
                  {"g_y", basis_json(g_basis_)},
                  {"fallback_calls", fallback_calls_},
                  {"rank_history", rank_history_}};
  return j;
}

}  // namespace lb::nn::backward
