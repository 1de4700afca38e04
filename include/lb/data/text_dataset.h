// Tokenized text examples in memory and their batching: each text is tokenized once up front;
// batches are padded to their longest sequence (dynamic padding, the Hugging Face
// DataCollatorWithPadding default) or to a fixed length (INSTANT's token axis needs a fixed L).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "lb/data/batch.h"
#include "lb/data/tokenizer.h"

namespace lb::data {

struct TextDataset {
  std::vector<Encoding> encodings;
  std::vector<double> labels;    // class ids or regression targets (empty: unlabeled)
  std::vector<int64_t> indices;  // the source file's example index (submission files)
  bool regression = false;
  int64_t size() const { return static_cast<int64_t>(encodings.size()); }
  bool labeled() const { return !labels.empty(); }
  int64_t longest() const;
};

struct TextLoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;
  int64_t pad_to = 0;  // 0: dynamic padding; else every batch is padded to this length
  int64_t pad_id = 0;
  // Data-parallel sharding: every batch of the epoch is one global batch of
  // batch_size · shard_count examples (the epoch order's next ones); this loader yields shard
  // shard_rank of it (near-equal contiguous parts, so the ranks' union is the global batch
  // and no example is seen twice in an epoch). shard_count 1: the whole batch.
  int64_t shard_rank = 0;
  int64_t shard_count = 1;
};

class TextLoader : public BatchSource {
 public:
  TextLoader(std::shared_ptr<const TextDataset> data, TextLoaderOptions opt);
  int64_t num_examples() const override { return data_->size(); }
  int64_t batches_per_epoch() const override;
  void start_epoch(int64_t epoch, int64_t start_batch = 0) override;
  bool next(Batch& out) override;

 private:
  std::shared_ptr<const TextDataset> data_;
  TextLoaderOptions opt_;
  std::vector<int64_t> order_;
  int64_t batch_ = 0;
};

}  // namespace lb::data
