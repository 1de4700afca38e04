// TextDataset / TextLoader (see text_dataset.h).
#include "lb/data/text_dataset.h"

#include <algorithm>

#include "lb/core/error.h"

namespace lb::data {

int64_t TextDataset::longest() const {
  size_t n = 0;
  for (const auto& e : encodings) n = std::max(n, e.input_ids.size());
  return static_cast<int64_t>(n);
}

TextLoader::TextLoader(std::shared_ptr<const TextDataset> data, TextLoaderOptions opt)
    : data_(std::move(data)), opt_(opt) {
  LB_CHECK(data_ && data_->size() > 0, "text loader: the dataset is empty");
  LB_CHECK(opt_.batch_size > 0, "text loader: batch_size must be > 0");
  LB_CHECK(opt_.shard_count >= 1 && opt_.shard_rank >= 0 && opt_.shard_rank < opt_.shard_count,
           "text loader: shard ", opt_.shard_rank, " of ", opt_.shard_count);
  LB_CHECK(opt_.pad_to == 0 || opt_.pad_to >= data_->longest(), "text loader: pad_to ",
           opt_.pad_to, " is shorter than the longest example (", data_->longest(), " tokens)");
  start_epoch(0);
}

int64_t TextLoader::batches_per_epoch() const {
  const int64_t n = data_->size(), g = opt_.batch_size * opt_.shard_count;
  return opt_.drop_last ? n / g : (n + g - 1) / g;
}

void TextLoader::start_epoch(int64_t epoch, int64_t start_batch) {
  order_ = epoch_order(data_->size(), opt_.shuffle, opt_.seed, epoch);
  LB_CHECK(start_batch >= 0 && start_batch <= batches_per_epoch(), "text loader: start batch ",
           start_batch, " outside the epoch's ", batches_per_epoch(), " batches");
  batch_ = start_batch;
}

bool TextLoader::next(Batch& out) {
  if (batch_ >= batches_per_epoch()) return false;
  const int64_t n = data_->size(), g = opt_.batch_size * opt_.shard_count;
  const int64_t g_begin = batch_ * g, g_len = std::min(n, g_begin + g) - g_begin;
  // This shard's part of the global batch: g_len split into shard_count near-equal runs.
  const int64_t base = g_len / opt_.shard_count, extra = g_len % opt_.shard_count, r = opt_.shard_rank;
  const int64_t begin = g_begin + r * base + std::min(r, extra);
  const int64_t end = begin + base + (r < extra ? 1 : 0);
  ++batch_;
  const int64_t B = end - begin;
  int64_t T = opt_.pad_to;
  if (T == 0)
    for (int64_t i = begin; i < end; ++i)
      T = std::max<int64_t>(T, static_cast<int64_t>(data_->encodings[order_[i]].input_ids.size()));
  Tensor ids = Tensor::full({B, T}, static_cast<double>(opt_.pad_id), DType::I64);
  Tensor types = Tensor::zeros({B, T}, DType::I64);
  Tensor mask = Tensor::zeros({B, T}, DType::F32);
  int64_t* pi = ids.data<int64_t>();
  int64_t* pt = types.data<int64_t>();
  float* pm = mask.data<float>();
  out.indices.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t ex = order_[begin + b];
    const Encoding& e = data_->encodings[ex];
    std::copy(e.input_ids.begin(), e.input_ids.end(), pi + b * T);
    std::copy(e.token_type_ids.begin(), e.token_type_ids.end(), pt + b * T);
    std::fill(pm + b * T, pm + b * T + static_cast<int64_t>(e.input_ids.size()), 1.0f);
    out.indices[b] = ex;
  }
  out.inputs = {{"input_ids", ids}, {"token_type_ids", types}, {"attention_mask", mask}};
  out.labels = Tensor();
  if (data_->labeled()) {
    if (data_->regression) {
      std::vector<float> y(B);
      for (int64_t b = 0; b < B; ++b) y[b] = static_cast<float>(data_->labels[order_[begin + b]]);
      out.labels = Tensor::from_vector<float>(y, {B});
    } else {
      std::vector<int64_t> y(B);
      for (int64_t b = 0; b < B; ++b) y[b] = static_cast<int64_t>(data_->labels[order_[begin + b]]);
      out.labels = Tensor::from_vector<int64_t>(y, {B});
    }
  }
  return true;
}

}  // namespace lb::data
