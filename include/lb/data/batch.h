// What the trainer consumes: batches of named input tensors plus labels, from a source that
// can start any epoch at any batch (exact resume). Text and image pipelines implement it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::data {

struct Batch {
  // Text: "input_ids", "token_type_ids" (B, T) i64 and "attention_mask" (B, T) f32 1/0;
  // images: "images" (B, C, H, W) f32.
  std::map<std::string, Tensor> inputs;
  Tensor labels;                 // (B) i64 (classes) or f32 (regression); undefined if unlabeled
  std::vector<int64_t> indices;  // positions of the examples in their dataset
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t num_examples() const = 0;
  virtual int64_t batches_per_epoch() const = 0;
  // Epoch `epoch` from batch `start_batch`: the order is a pure function of (seed, epoch).
  virtual void start_epoch(int64_t epoch, int64_t start_batch = 0) = 0;
  // The next batch of the current epoch; false at its end.
  virtual bool next(Batch& out) = 0;
  // Milliseconds next() spent waiting for data not yet prepared (background pipelines).
  virtual double wait_ms() const { return 0; }
};

// The example order of an epoch: identity without shuffling, else a Fisher–Yates shuffle
// driven by Philox(seed, subsequence = epoch), so any epoch can be recomputed on resume.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace lb::data
