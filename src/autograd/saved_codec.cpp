// Kept-tensor codecs (contract in lb/autograd/saved_codec.h; kernels src/backend/codec.h).
#include "lb/autograd/saved_codec.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <unordered_map>

#include "lb/autograd/module_scope.h"
#include "lb/core/glob.h"
#include "src/backend/codec.h"
#include "src/backend/copy.h"

namespace lb::autograd {

namespace {

backend::CodecKind kind_of(Codec c) {
  switch (c) {
    case Codec::BF16: return backend::CodecKind::BF16;
    case Codec::Int8: return backend::CodecKind::Int8;
    case Codec::Int4: return backend::CodecKind::Int4;
    case Codec::Int2: return backend::CodecKind::Int2;
    case Codec::F32: break;
  }
  LB_FAIL("internal: codec f32 has no packed form");
}

// Every live encoding: its storage, and what it decodes to. Keyed by the storage's address;
// a hit needs the weak pointer to still be that storage (a freed address reused is no hit).
struct Encoding {
  std::weak_ptr<Storage> storage;
  Shape shape;
  DType dtype;
  backend::CodecLayout layout;
};
std::mutex g_registry_mutex;
std::unordered_map<const Storage*, Encoding>& registry() {
  static std::unordered_map<const Storage*, Encoding> r;
  return r;
}
std::atomic<int64_t> g_registry_size{0};
size_t g_next_purge = 64;

void register_encoding(const Tensor& packed, const Shape& shape, DType dtype, const backend::CodecLayout& l) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto& r = registry();
  if (r.size() >= g_next_purge) {  // drop the encodings already freed
    for (auto it = r.begin(); it != r.end();) it = it->second.storage.expired() ? r.erase(it) : std::next(it);
    g_next_purge = std::max<size_t>(64, 2 * r.size());
  }
  r[packed.storage().get()] = {packed.storage(), shape, dtype, l};
  g_registry_size.store(static_cast<int64_t>(r.size()), std::memory_order_relaxed);
}

bool find_encoding(const Tensor& t, Encoding* out) {
  if (!t.defined() || t.dtype() != DType::U8 || g_registry_size.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  const auto it = registry().find(t.storage().get());
  if (it == registry().end() || it->second.storage.lock() != t.storage()) return false;
  if (out) *out = it->second;
  return true;
}

// This thread's open scope: the rules, the stream position, and the encodings it made (a
// tensor kept by several nodes is encoded once).
struct ScopeState {
  std::shared_ptr<const CodecRules> rules;
  uint64_t seed = 0, subsequence = 0, offset = 0;
  struct Made {
    std::weak_ptr<Storage> source;
    int64_t offset;
    Shape shape, strides;
    DType dtype;
    int rule;
    std::weak_ptr<Storage> packed;
  };
  std::vector<Made> made;
};
thread_local ScopeState* t_scope = nullptr;

// The codec stream's key: the run's seed, moved off the strategies' streams.
constexpr uint64_t kCodecKey = 0xC0DEC5EEDull;

}  // namespace

const char* codec_name(Codec c) {
  switch (c) {
    case Codec::F32: return "f32";
    case Codec::BF16: return "bf16";
    case Codec::Int8: return "int8";
    case Codec::Int4: return "int4";
    case Codec::Int2: return "int2";
  }
  return "?";
}

bool parse_codec(const std::string& name, Codec* out) {
  for (Codec c : {Codec::F32, Codec::BF16, Codec::Int8, Codec::Int4, Codec::Int2})
    if (name == codec_name(c)) {
      *out = c;
      return true;
    }
  return false;
}

struct CodecRules::Counts {
  std::mutex mutex;
  std::vector<int64_t> matches;
  std::set<std::string> ops;
};

CodecRules::CodecRules(std::vector<CodecRule> rules) : rules_(std::move(rules)), counts_(std::make_shared<Counts>()) {
  counts_->matches.assign(rules_.size(), 0);
}

int CodecRules::decide(const std::string& module, const std::string& op, const std::string& role) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    const CodecRule& r = rules_[i];
    if (glob_match(r.match, module) && glob_match(r.op, op) && glob_match(r.role, role)) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int64_t> CodecRules::matches() const {
  std::lock_guard<std::mutex> lock(counts_->mutex);
  return counts_->matches;
}

std::vector<std::string> CodecRules::ops_seen() const {
  std::lock_guard<std::mutex> lock(counts_->mutex);
  return {counts_->ops.begin(), counts_->ops.end()};
}

void CodecRules::note(int rule, const std::string& op) const {
  std::lock_guard<std::mutex> lock(counts_->mutex);
  counts_->ops.insert(op);
  if (rule >= 0) ++counts_->matches[static_cast<size_t>(rule)];
}

void CodecRules::reset_matches() const {
  std::lock_guard<std::mutex> lock(counts_->mutex);
  counts_->matches.assign(rules_.size(), 0);
  counts_->ops.clear();
}

struct SavedCodecScope::Saved {
  ScopeState state;
  ScopeState* outer = nullptr;
};

SavedCodecScope::SavedCodecScope(std::shared_ptr<const CodecRules> rules, uint64_t seed, int64_t step,
                                 uint64_t stream)
    : previous_(std::make_unique<Saved>()) {
  previous_->outer = t_scope;
  ScopeState& s = previous_->state;
  s.rules = std::move(rules);
  s.seed = seed ^ kCodecKey;
  s.subsequence = (static_cast<uint64_t>(step) << 4) | (stream & 15u);
  t_scope = &s;
}

SavedCodecScope::~SavedCodecScope() { t_scope = previous_->outer; }

Tensor encode(const Tensor& x, const CodecSpec& spec, uint64_t seed, uint64_t subsequence, uint64_t offset) {
  LB_CHECK(x.defined(), "encode: undefined tensor");
  LB_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::F64, "encode: ", dtype_name(x.dtype()),
           " tensor (codecs take f32 or f64)");
  if (spec.codec == Codec::F32) return x;
  LB_CHECK(spec.group >= 0, "encode: group must be >= 0 (0: per row), got ", spec.group);
  const int64_t row = x.dim() > 0 ? x.shape().back() : 1;
  const int64_t group = spec.group == 0 ? std::max<int64_t>(row, 1) : spec.group;
  const backend::CodecLayout layout = backend::codec_layout(kind_of(spec.codec), x.numel(), group);
  const Tensor xc = backend::contiguous(x);
  Tensor packed = Tensor::empty({std::max<int64_t>(layout.bytes(), 1)}, DType::U8, x.device());
  backend::codec_kernels(x.device()).pack(xc, packed, layout, {spec.stochastic, seed, subsequence, offset});
  register_encoding(packed, x.shape(), x.dtype(), layout);
  return packed;
}

Tensor decode(const Tensor& t) {
  Encoding e;
  if (!find_encoding(t, &e)) return t;
  Tensor out = Tensor::empty(e.shape, e.dtype, t.device());
  backend::codec_kernels(t.device()).unpack(t, out, e.layout);
  return out;
}

bool is_encoded(const Tensor& t) { return find_encoding(t, nullptr); }

bool codecs_active() { return t_scope && t_scope->rules && !t_scope->rules->empty(); }

Tensor encode_kept(const Tensor& t, const std::string& op, const std::string& role) {
  ScopeState* s = t_scope;
  if (!s || !s->rules || s->rules->empty() || !t.defined() || role == "state") return t;
  if (t.dtype() != DType::F32 && t.dtype() != DType::F64) return t;
  if (const MemTag tag = t.storage()->tag(); tag == MemTag::Parameter || tag == MemTag::Buffer) return t;
  const int rule = s->rules->decide(current_module_scope(), op, role);
  s->rules->note(rule, op);
  if (rule < 0) return t;
  const CodecSpec& spec = s->rules->rules()[static_cast<size_t>(rule)].spec;
  if (spec.codec == Codec::F32) return t;
  for (const auto& m : s->made) {
    if (m.rule != rule || m.offset != t.offset() || m.dtype != t.dtype() || m.shape != t.shape() ||
        m.strides != t.strides() || m.source.lock() != t.storage())
      continue;
    if (auto packed = m.packed.lock()) {
      auto impl = std::make_shared<TensorImpl>();
      impl->storage = packed;
      impl->shape = {static_cast<int64_t>(packed->nbytes())};
      impl->strides = {1};
      impl->dtype = DType::U8;
      return Tensor(std::move(impl));
    }
  }
  Tensor packed = encode(t, spec, s->seed, s->subsequence, s->offset);
  if (spec.stochastic) s->offset += static_cast<uint64_t>((t.numel() + 1) / 2);  // draws used
  std::erase_if(s->made, [](const ScopeState::Made& m) { return m.packed.expired() || m.source.expired(); });
  s->made.push_back({t.storage(), t.offset(), t.shape(), t.strides(), t.dtype(), rule, packed.storage()});
  return packed;
}

}  // namespace lb::autograd
