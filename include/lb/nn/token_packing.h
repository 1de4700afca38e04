// Padding-free layout for variable-length sequences: the kept tokens of a padded (B, T)
// batch stored back to back as one (1, N) row of tokens, as Hugging Face's
// DataCollatorWithFlattening lays them out (so a Linear sees one sample of N tokens and its
// strategy's per-sample figures are per batch). Token-wise layers (Linear, LayerNorm, activations,
// dropout) then spend nothing on padding, which is a third to two thirds of a dynamically
// padded GLUE batch; only attention, which mixes tokens of one sequence, runs on the padded
// (B, T, H) layout (unpack, attend with the key-padding mask, pack). The result equals the
// padded computation's on every kept token: padded positions never reach a kept token
// (their keys are masked) and no loss reads them, so their gradient is zero either way.
// All moves are index_select, so gradients flow through them like any other op.
#pragma once
#include <memory>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::nn {

class TokenPacking {
 public:
  // keep (B, T): 1 = token, 0 = padding (any numeric dtype).
  static TokenPacking from_keep_mask(const Tensor& keep);

  int64_t batch() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t tokens() const { return tokens_; }                    // N
  bool has_padding() const { return tokens_ < batch_ * seq_len_; }
  // Every sequence keeps its first token (BERT's [CLS]), so first_rows() exists.
  bool keeps_first_tokens() const { return keeps_first_; }
  // Every sequence keeps a prefix of its row (positions 0 .. L_b - 1, L_b ≥ 1): the
  // right-padded layout tokenizers produce. Then sequence_offsets() exist.
  bool keeps_prefixes() const { return keeps_prefixes_; }
  // (B + 1): sequence b is packed tokens [offsets[b], offsets[b+1]) (requires keeps_prefixes()).
  const std::shared_ptr<const std::vector<int64_t>>& sequence_offsets() const { return offsets_; }

  // (B, T, ...) -> (1, N, ...): the kept tokens, in batch-major order (any dtype).
  Tensor pack(const Tensor& padded) const;
  // (1, N, H) -> (B, T, H) with zero rows at the padding.
  Tensor unpack(const Tensor& packed) const;
  // (1, N) i64: each kept token's position t inside its sequence.
  const Tensor& positions() const { return positions_; }
  // (1, N, H) -> (B, H): each sequence's first token (requires keeps_first_tokens()).
  Tensor first_tokens(const Tensor& packed) const;

 private:
  int64_t batch_ = 0, seq_len_ = 0, tokens_ = 0;
  bool keeps_first_ = false, keeps_prefixes_ = false;
  std::shared_ptr<const std::vector<int64_t>> offsets_;
  Tensor rows_;       // (N): b·T + t of each kept token
  Tensor slots_;      // (B·T): the packed row of each position, N (a zero row) for padding
  Tensor positions_;  // (1, N)
  Tensor first_rows_; // (B): the packed row of each sequence's first token
};

}  // namespace lb::nn
