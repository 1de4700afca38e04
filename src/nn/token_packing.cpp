// TokenPacking (see lb/nn/token_packing.h).
#include "lb/nn/token_packing.h"

#include <utility>

#include "lb/core/error.h"
#include "lb/ops/shape_ops.h"

namespace lb::nn {

TokenPacking TokenPacking::from_keep_mask(const Tensor& keep) {
  LB_CHECK(keep.dim() == 2, "token packing: attention mask must be (B, T), got ", shape_str(keep.shape()));
  TokenPacking p;
  p.batch_ = keep.size(0);
  p.seq_len_ = keep.size(1);
  const auto k = keep.to(Device::cpu()).to_double_vector();  // the layout is worked out on the host
  const int64_t BT = p.batch_ * p.seq_len_;
  std::vector<int64_t> rows, positions, first(p.batch_, -1), slots(BT);
  std::vector<int64_t> offsets(p.batch_ + 1, 0);
  rows.reserve(BT);
  positions.reserve(BT);
  p.keeps_prefixes_ = p.seq_len_ > 0;
  for (int64_t i = 0; i < BT; ++i) {
    const int64_t b = i / p.seq_len_, t = i % p.seq_len_;
    // A kept token after a padded one (or a row with no token) breaks the prefix layout.
    if (k[i] != 0 && t > 0 && k[i - 1] == 0) p.keeps_prefixes_ = false;
    if (k[i] != 0) offsets[b + 1] = t + 1;
    if (k[i] == 0) continue;
    if (i % p.seq_len_ == 0) first[i / p.seq_len_] = static_cast<int64_t>(rows.size());
    slots[i] = static_cast<int64_t>(rows.size());
    rows.push_back(i);
    positions.push_back(i % p.seq_len_);
  }
  p.tokens_ = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < BT; ++i)
    if (k[i] == 0) slots[i] = p.tokens_;
  p.keeps_first_ = p.seq_len_ > 0;
  for (int64_t f : first) p.keeps_first_ = p.keeps_first_ && f >= 0;
  p.keeps_prefixes_ = p.keeps_prefixes_ && p.keeps_first_;
  if (p.keeps_prefixes_) {
    for (int64_t b = 0; b < p.batch_; ++b) offsets[b + 1] += offsets[b];
    p.offsets_ = std::make_shared<const std::vector<int64_t>>(std::move(offsets));
  }
  const Device dev = keep.device();  // the index tensors live beside the batch
  p.rows_ = Tensor::from_vector<int64_t>(rows, {p.tokens_}).to(dev);
  p.slots_ = Tensor::from_vector<int64_t>(slots, {BT}).to(dev);
  p.positions_ = Tensor::from_vector<int64_t>(positions, {1, p.tokens_}).to(dev);
  if (p.keeps_first_) p.first_rows_ = Tensor::from_vector<int64_t>(first, {p.batch_}).to(dev);
  return p;
}

Tensor TokenPacking::pack(const Tensor& padded) const {
  LB_CHECK(padded.dim() >= 2 && padded.size(0) == batch_ && padded.size(1) == seq_len_,
           "token packing: expected (", batch_, ", ", seq_len_, ", ...), got ", shape_str(padded.shape()));
  Shape flat = padded.shape();
  flat.erase(flat.begin());
  flat[0] = batch_ * seq_len_;
  Tensor packed = index_select(padded.reshape(flat), 0, rows_);
  flat[0] = tokens_;
  flat.insert(flat.begin(), 1);
  return packed.reshape(flat);
}

namespace {
// (1, N, H) -> (N, H), checked.
Tensor rows_of(const Tensor& packed, int64_t tokens) {
  LB_CHECK(packed.dim() == 3 && packed.size(0) == 1 && packed.size(1) == tokens,
           "token packing: expected (1, ", tokens, ", H), got ", shape_str(packed.shape()));
  return packed.reshape({tokens, packed.size(2)});
}
}  // namespace

Tensor TokenPacking::unpack(const Tensor& packed) const {
  const Tensor rows = rows_of(packed, tokens_);
  const Tensor zero_row = Tensor::zeros({1, rows.size(1)}, rows.dtype(), rows.device());
  return index_select(concat({rows, zero_row}, 0), 0, slots_).reshape({batch_, seq_len_, rows.size(1)});
}

Tensor TokenPacking::first_tokens(const Tensor& packed) const {
  LB_CHECK(keeps_first_, "token packing: a sequence's first token is padding");
  return index_select(rows_of(packed, tokens_), 0, first_rows_);
}

}  // namespace lb::nn
