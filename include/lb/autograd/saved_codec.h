// Kept-tensor codecs: what the tape keeps for backward, stored in fewer bits.
//
// While a SavedCodecScope is open, record() (node.h) stores each tensor an op keeps as it is
// (its input or its output: roles "input", "input1", ..., "output" of saved_breakdown.h) in the
// codec of the first rule matching (module path, op, role), and the node's backward gets it
// back decoded (in the tensor's dtype and shape). Tensors an op computes to keep ("state":
// statistics, masks, INSTANT/HOT's compressed copies, bf16 product operands), parameters,
// buffers and integer tensors keep their own format. A tensor kept by several nodes is encoded
// once, and a consumer that keeps a producer's kept tensors (exact lean, kept_input.h) keeps
// the encoded ones: nothing is stored twice.
//
// Codecs (formulas and byte layout: src/backend/codec.h):
//   f32   as it is (no rule, or an explicit exception before a broader rule)
//   bf16  round to nearest even: 2 bytes per element
//   int8  per-group absmax scale, 1 byte per element + 4 bytes per group
//   int4  per-group min/max (affine), 0.5 byte + 8 bytes per group
//   int2  per-group min/max (affine), 0.25 byte + 8 bytes per group
// Integer codecs round half up or stochastically (unbiased: E[x̂] = x up to 2⁻¹⁶ of a step),
// drawing 16 bits per element from a Philox stream keyed by the scope's seed and step, in
// recording order, so a step is reproducible (and a resumed run draws what an uninterrupted
// one does).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::autograd {

enum class Codec { F32, BF16, Int8, Int4, Int2 };
const char* codec_name(Codec c);
// "f32" | "bf16" | "int8" | "int4" | "int2"; false when `name` is none of them.
bool parse_codec(const std::string& name, Codec* out);

struct CodecSpec {
  Codec codec = Codec::F32;
  int64_t group = 128;      // elements per scale; 0: one per row (the last dimension)
  bool stochastic = false;  // integer codecs: stochastic rounding, else round half up
};

struct CodecRule {
  std::string match = "*";  // glob over the recording module's dotted path
  std::string op = "*";     // glob over the op (node) name: "gelu", "layer_norm", "linear", ...
  std::string role = "*";   // glob over the role: "input", "input1", "output"
  CodecSpec spec;
  // A rule from a config must decide some tensor (else it is a typo); a planner's rule for a
  // block whose tensors an earlier node keeps first need not.
  bool must_match = true;
};

// Rules in order, first match wins; no match: f32. Counts, per rule, the tensors it decided
// (for the "a rule that matches nothing" check after a step).
class CodecRules {
 public:
  explicit CodecRules(std::vector<CodecRule> rules = {});
  // The index of the first rule matching, or -1.
  int decide(const std::string& module, const std::string& op, const std::string& role) const;
  const std::vector<CodecRule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }
  // Tensors each rule decided since construction (or reset_matches), and the op names seen.
  std::vector<int64_t> matches() const;
  std::vector<std::string> ops_seen() const;
  void note(int rule, const std::string& op) const;
  void reset_matches() const;

 private:
  std::vector<CodecRule> rules_;
  struct Counts;
  std::shared_ptr<Counts> counts_;
};

// Opens encoding for this thread's forward: record() consults `rules` (null or empty: nothing
// is encoded). Stochastic rounding draws from the stream keyed by (seed, step, stream). Scopes
// nest; the inner one wins.
class SavedCodecScope {
 public:
  SavedCodecScope(std::shared_ptr<const CodecRules> rules, uint64_t seed, int64_t step, uint64_t stream = 0);
  ~SavedCodecScope();
  SavedCodecScope(const SavedCodecScope&) = delete;
  SavedCodecScope& operator=(const SavedCodecScope&) = delete;

 private:
  struct Saved;
  std::unique_ptr<Saved> previous_;
};

// Whether this thread has a scope with rules open (record() asks before building role names).
bool codecs_active();
// What record() stores for a kept tensor `t` with this role in this op: t, or its encoding.
Tensor encode_kept(const Tensor& t, const std::string& op, const std::string& role);

// Encoding by hand (tests, benchmarks): `x` (f32 or f64, any layout) as a packed tensor, the
// draws of stochastic rounding at (seed, subsequence, offset). F32 returns x.
Tensor encode(const Tensor& x, const CodecSpec& spec, uint64_t seed = 0, uint64_t subsequence = 0,
              uint64_t offset = 0);
// The tensor again from what encode/encode_kept returned (a new contiguous tensor of the
// original dtype and shape), or `t` itself when it is not an encoding.
Tensor decode(const Tensor& t);
bool is_encoded(const Tensor& t);

}  // namespace lb::autograd
