// ImageLoader: batches of an in-memory ImageSet as normalised f32 (B, C, H, W) tensors, with
// torchvision-style augmentation (RandomCrop with zero padding, RandomHorizontalFlip), prepared
// ahead of time by background threads.
//
// Randomness (a pure function of seed, epoch and position, so batches do not depend on the
// number of workers, on timing, or on where an epoch was started):
//  - Order of epoch e: data::epoch_order(n, shuffle, seed, e) (batch.h), shared with the text
//    loader: with shuffle, Fisher–Yates on [0, n) driven by PhiloxStream(seed, subsequence = e),
//    for i = n-1 down to 1: r = (next_u32() << 32) | next_u32(), swap(order[i], order[r mod
//    (i+1)]); without shuffle, the identity. Batch k holds positions [k·B, min(n, (k+1)·B)).
//  - Augmentation of the example at position p of epoch e: one Philox4x32-10 block
//    w = philox4x32_10(counter = {lo32(p), hi32(p), lo32(e), 0x41554731 "AUG1"},
//    key = {lo32(seed), hi32(seed)}); with padding P, the crop offsets are
//    dy = (w[0]·(2P+1)) >> 32 and dx = (w[1]·(2P+1)) >> 32, both in [0, 2P]; flip = w[2] >> 31
//    (when horizontal_flip). The order stream's counters have hi32(e) = 0 in that word
//    (epochs are < 2^31), so the two never share a block.
// Pixels (as RandomCrop(H, padding=P) → RandomHorizontalFlip → ToTensor → Normalize):
//   cropped(y, x) = image(y + dy - P, x + dx - P), 0 outside the image (so padding reads as
//   (0 - mean) / std); out(y, x) = cropped(y, W-1-x) when flipped; value in f32
//   (float(v) / 255 - mean[c]) / std[c], exactly ToTensor's and Normalize's f32 arithmetic.
//
// Threads: start_epoch, next, wait_ms and reset_wait are called from one thread (the
// trainer's); workers only build batches. An exception while building a batch (including one
// thrown by batch_transform) is rethrown by the next() that would have returned that batch.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "lb/core/tensor.h"
#include "lb/data/images.h"

namespace lb::data {

struct ImageAugment {
  int64_t random_crop_padding = 0;  // 0: no crop; else pad by p (zeros), crop HxW at a random offset
  bool horizontal_flip = false;     // p = 0.5
};

struct ImageBatch {
  Tensor images;                 // (B, C, H, W) f32, normalised
  Tensor labels;                 // (B) i64
  std::vector<int64_t> indices;  // dataset indices of the batch's examples
};

struct ImageLoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;
  ImageAugment augment;  // applied when training (set {} for eval)
  // Per channel, on [0, 1] pixels (CIFAR-10 training-set statistics by default).
  std::vector<float> mean = {0.4914f, 0.4822f, 0.4465f}, std = {0.2470f, 0.2435f, 0.2616f};
  int workers = 2;   // background threads preparing batches (0: prepare in next() on the caller's thread)
  int prefetch = 4;  // batches prepared ahead (ready or being built)
  // Data-parallel sharding, as TextLoaderOptions: batch k is shard shard_rank of the global
  // batch of batch_size · shard_count examples (augmentation draws keyed by the global
  // position, so a sharded run sees what one process with the global batch sees).
  int64_t shard_rank = 0;
  int64_t shard_count = 1;
  // Optional extra step on each finished batch (e.g. Cutout), run on the worker thread that
  // built it: it must be thread-safe, and a pure function of (batch, epoch, batch index) for
  // exact resume. What it throws surfaces in next().
  std::function<void(ImageBatch&, int64_t epoch, int64_t batch)> batch_transform;
};

// The augmentation draw documented above, for tests and for tools that replay a run.
struct AugmentDraw {
  int64_t dy = 0, dx = 0;  // crop offset in the padded image, in [0, 2P]
  bool flip = false;
};
AugmentDraw augment_draw(const ImageAugment& augment, uint64_t seed, int64_t epoch,
                         int64_t position);

class ImageLoader {
 public:
  ImageLoader(std::shared_ptr<const ImageSet> set, ImageLoaderOptions opt);
  ~ImageLoader();  // stops and joins the workers (a batch being built is finished first)
  ImageLoader(const ImageLoader&) = delete;
  ImageLoader& operator=(const ImageLoader&) = delete;

  int64_t batches_per_epoch() const;
  // Starts epoch `epoch` at batch `start_batch` (for exact resume); batches still prepared
  // for an earlier epoch are dropped.
  void start_epoch(int64_t epoch, int64_t start_batch = 0);
  // Next batch of the current epoch in order; false at the end of the epoch.
  bool next(ImageBatch& out);
  // Total milliseconds next() spent waiting for a batch not yet ready (with workers = 0: the
  // time spent building batches), the "data wait" the trainer reports.
  double wait_ms() const;
  void reset_wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lb::data
