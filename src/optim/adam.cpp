// Adam / AdamW with bias correction (torch.optim.Adam / AdamW):
//   AdamW: p *= 1 - lr·wd;   Adam: g += wd·p
//   m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²
//   p -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
// The per-element update: src/backend/optim.h (CPU and CUDA kernels).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "lb/core/dispatch.h"
#include "lb/optim/optimizer.h"
#include "lb/optim/state_codec.h"
#include "src/backend/optim.h"
#include "src/backend/row_slots.h"

namespace lb::optim {

namespace {

// One coded moment of a parameter: its codes and its blocks' absolute maxima.
struct CodedMoment {
  StateCodec codec;
  uint8_t* codes;
  float* absmax;
};

// A parameter's gradient as coded_adam reads it, block by block: a dense tensor, or rows
// (rows (K,) i64 distinct, values (K, D)) with zeros on every other row.
struct GradBlocks {
  const float* dense = nullptr;
  const float* values = nullptr;
  const int64_t* slot = nullptr;  // row -> index in values, or -1
  int64_t row_len = 0;
  // The gradient of elements [at, at + len): a pointer into the dense gradient, or `scratch`
  // filled from the rows.
  const float* block(int64_t at, int64_t len, float* scratch) const {
    if (dense) return dense + at;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t e = at + i, s = slot[e / row_len];
      scratch[i] = s >= 0 ? values[s * row_len + e % row_len] : 0.0f;
    }
    return scratch;
  }
};

// Decode a block of m and v, update it as f32 Adam does (the same formula), code it again.
// Blocks are independent, so they run in parallel and the result does not depend on threads.
// `seed`: the parameter's and step's, keying the 4-bit codes' stochastic rounding per block.
void coded_adam(Tensor& p, const GradBlocks& g, CodedMoment m, CodedMoment v, const backend::AdamCoefs<float>& c,
                uint64_t seed) {
  const int64_t n = p.numel(), block = m.codec.block;
  float* w = p.data<float>();
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t b = 0; b < num_blocks(m.codec, n); ++b) {
    const int64_t at = b * block, len = std::min(block, n - at);
    float mb[256], vb[256], scratch[256];
    const int64_t byte = code_bytes(m.codec, at);
    decode_block(m.codec, m.codes + byte, m.absmax[b], len, mb);
    decode_block(v.codec, v.codes + byte, v.absmax[b], len, vb);
    const float* gd = g.block(at, len, scratch);
    for (int64_t i = 0; i < len; ++i) backend::adam_update(w[at + i], gd[i], mb[i], vb[i], c);
    const uint64_t block_seed = seed ^ (static_cast<uint64_t>(b) * 0xD1B54A32D192ED03ull);
    m.absmax[b] = encode_block(m.codec, mb, len, m.codes + byte, block_seed);
    v.absmax[b] = encode_block(v.codec, vb, len, v.codes + byte, ~block_seed);
  }
}

// FNV-1a of a parameter's name: its draws do not depend on the order parameters are stepped.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001B3ull;
  return h;
}

}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions opts) : Optimizer(std::move(groups)), opts_(opts) {
  LB_CHECK(opts.beta1 >= 0 && opts.beta1 < 1 && opts.beta2 >= 0 && opts.beta2 < 1,
           "Adam betas must be in [0, 1), got (", opts.beta1, ", ", opts.beta2, ")");
  LB_CHECK(opts.eps >= 0, "Adam eps must be >= 0, got ", opts.eps);
  LB_CHECK(opts.state_bits == 32 || opts.state_bits == 8 || opts.state_bits == 4,
           "Adam state_bits must be 32, 8 or 4, got ", opts.state_bits);
  if (opts.state_bits != 32)
    for (const auto& g : groups_)
      for (const auto& [name, p] : g.params)
        LB_CHECK(p.device().is_cpu() && p.dtype() == DType::F32, "Adam with ", opts.state_bits,
                 "-bit state: parameter '", name, "' is ", dtype_name(p.dtype()), " on ", p.device().str(),
                 "; coded state runs on f32 parameters on the CPU so far");
}

nlohmann::json Adam::hyperparams() const {
  nlohmann::json j = {{"beta1", opts_.beta1}, {"beta2", opts_.beta2}, {"eps", opts_.eps},
                      {"decoupled", opts_.decoupled}};
  if (opts_.state_bits != 32) j["state_bits"] = opts_.state_bits;  // older checkpoints: f32
  return j;
}

std::vector<std::string> Adam::state_kinds() const {
  if (opts_.state_bits == 32) return {"exp_avg", "exp_avg_sq"};
  return {"exp_avg", "exp_avg.absmax", "exp_avg_sq", "exp_avg_sq.absmax"};
}

std::pair<Shape, DType> Adam::state_spec(const std::string& kind, const Tensor& p) const {
  if (opts_.state_bits == 32) return Optimizer::state_spec(kind, p);
  const StateCodec c = moment_codec(opts_.state_bits);
  if (kind.size() > 7 && kind.compare(kind.size() - 7, 7, ".absmax") == 0)
    return {{num_blocks(c, p.numel())}, DType::F32};
  return {{code_bytes(c, p.numel())}, DType::U8};
}

void Adam::check_saved_hyperparams(const nlohmann::json& saved) const {
  const int bits = saved.is_object() && saved.contains("state_bits") && saved["state_bits"].is_number_integer()
                       ? saved["state_bits"].get<int>()
                       : 32;
  LB_CHECK(bits == opts_.state_bits, "optimizer state was stored in ", bits, " bits, this optimizer keeps ",
           opts_.state_bits, " (optimizer.state_bits); resume with the setting the run trained with");
}

struct Adam::Grad {
  Tensor dense;         // or
  Tensor rows, values;  // row-sparse
};

void Adam::update(const std::string& name, Tensor& p, const Tensor& g, const ParamGroup& group,
                  std::map<std::string, Tensor>& state) {
  LB_CHECK(p.is_contiguous() && g.is_contiguous() && g.shape() == p.shape() && g.dtype() == p.dtype(),
           "Adam: the gradient must be a contiguous tensor of the parameter's shape and dtype");
  apply(name, p, {g, {}, {}}, group, state);
}

bool Adam::rows_supported(const Tensor& p) const {
  const auto& k = backend::optim_kernels(p.device());
  return p.device().is_cpu() && k.adam_rows_f32 && k.adam_rows_f64;
}

void Adam::update_rows(const std::string& name, Tensor& p, const Tensor& rows, const Tensor& values,
                       const ParamGroup& group, std::map<std::string, Tensor>& state) {
  apply(name, p, {{}, rows, values}, group, state);
}

void Adam::apply(const std::string& name, Tensor& p, const Grad& g, const ParamGroup& group,
                 std::map<std::string, Tensor>& state) {
  if (!state.count("exp_avg"))
    for (const auto& kind : state_kinds()) {
      const auto [shape, dtype] = state_spec(kind, p);
      state[kind] = Tensor::zeros(shape, dtype, p.device(), MemTag::Optimizer);
    }
  const double t = static_cast<double>(step_count_);
  const double bc1 = 1 - std::pow(opts_.beta1, t), bc2 = 1 - std::pow(opts_.beta2, t);
  Tensor& m = state["exp_avg"];
  Tensor& v = state["exp_avg_sq"];
  const auto& k = backend::optim_kernels(p.device());
  const bool dense = g.dense.defined();
  detail::dispatch_float(p.dtype(), "Adam", [&](auto tag) {
    using T = decltype(tag);
    backend::AdamCoefs<T> c;
    c.b1 = static_cast<T>(opts_.beta1);
    c.b2 = static_cast<T>(opts_.beta2);
    c.eps = static_cast<T>(opts_.eps);
    c.step_size = static_cast<T>(group.lr / bc1);
    c.inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
    c.decay = static_cast<T>(opts_.decoupled ? 1.0 - group.lr * group.weight_decay : 1.0);
    c.l2 = static_cast<T>(opts_.decoupled ? 0.0 : group.weight_decay);
    if constexpr (std::is_same_v<T, float>) {
      if (opts_.state_bits == 32) {
        if (dense) k.adam_f32(p, g.dense, m, v, c);
        else k.adam_rows_f32(p, g.rows, g.values, m, v, c);
        return;
      }
      GradBlocks blocks;
      std::vector<int64_t> slot;
      if (dense) {
        blocks.dense = g.dense.data<float>();
      } else {
        slot = backend::row_slots(g.rows, p.size(0));
        blocks = {nullptr, g.values.data<float>(), slot.data(), p.size(1)};
      }
      coded_adam(p, blocks, {moment_codec(opts_.state_bits), m.data<uint8_t>(), state["exp_avg.absmax"].data<float>()},
                 {second_moment_codec(opts_.state_bits), v.data<uint8_t>(), state["exp_avg_sq.absmax"].data<float>()},
                 c, name_hash(name) + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step_count_));
    } else if (dense) {
      k.adam_f64(p, g.dense, m, v, c);  // coded state takes f32 parameters only (the constructor checks)
    } else {
      k.adam_rows_f64(p, g.rows, g.values, m, v, c);
    }
  });
}

}  // namespace lb::optim
