// ImageLoader: coverage of every example per epoch, independence from the worker count and
// from where an epoch starts, the documented random derivations, exact normalisation, crop and
// flip against a direct reference, clean shutdown and errors surfacing in next().
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "lb/core/philox.h"
#include "lb/data/batch.h"
#include "lb/data/image_loader.h"
#include "testing/testing.h"

namespace lb::data {
namespace {

// n random images of h x w x c (Philox bytes), labels i % 4.
std::shared_ptr<ImageSet> random_set(int64_t n, int64_t h, int64_t w, int64_t c = 3) {
  auto s = std::make_shared<ImageSet>();
  s->height = h;
  s->width = w;
  s->channels = c;
  s->classes = {"a", "b", "c", "d"};
  PhiloxStream rng(1234);
  s->pixels.resize(static_cast<size_t>(n * h * w * c));
  for (auto& v : s->pixels) v = static_cast<uint8_t>(rng.next_u32());
  for (int64_t i = 0; i < n; ++i) s->labels.push_back(i % 4);
  return s;
}

std::vector<ImageBatch> run_epoch(ImageLoader& loader, int64_t epoch, int64_t start = 0) {
  loader.start_epoch(epoch, start);
  std::vector<ImageBatch> out;
  for (ImageBatch b; loader.next(b);) out.push_back(b);
  return out;
}

std::vector<float> floats(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

void expect_same_batches(const std::vector<ImageBatch>& a, const std::vector<ImageBatch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].indices, b[k].indices) << "batch " << k;
    EXPECT_EQ(a[k].labels.to_double_vector(), b[k].labels.to_double_vector()) << "batch " << k;
    EXPECT_EQ(a[k].images.shape(), b[k].images.shape()) << "batch " << k;
    EXPECT_TRUE(floats(a[k].images) == floats(b[k].images)) << "batch " << k;
  }
}

ImageLoaderOptions small_options(int workers) {
  ImageLoaderOptions o;
  o.batch_size = 8;
  o.seed = 99;
  o.workers = workers;
  o.prefetch = 2;
  o.augment.random_crop_padding = 2;
  o.augment.horizontal_flip = true;
  return o;
}

// The data order the PyTorch twins reproduce (tools/bench/lb_philox.py pins the same cases):
// changing epoch_order changes what the twins must port.
TEST(EpochOrder, LeanbackOrderIsPinned) {
  EXPECT_EQ(epoch_order(10, true, 1, 0), (std::vector<int64_t>{4, 2, 5, 7, 1, 9, 0, 6, 3, 8}));
  EXPECT_EQ(epoch_order(12, true, 3, 2), (std::vector<int64_t>{2, 11, 1, 0, 3, 10, 7, 6, 9, 4, 8, 5}));
}

TEST(ImageLoader, EveryExampleOncePerEpoch) {
  const auto set = random_set(37, 5, 7);
  for (bool shuffle : {false, true}) {
    for (bool drop_last : {false, true}) {
      ImageLoaderOptions o = small_options(2);
      o.shuffle = shuffle;
      o.drop_last = drop_last;
      ImageLoader loader(set, o);
      EXPECT_EQ(loader.batches_per_epoch(), drop_last ? 4 : 5);
      const auto batches = run_epoch(loader, 3);
      ASSERT_EQ(static_cast<int64_t>(batches.size()), loader.batches_per_epoch());
      std::vector<int64_t> seen;
      for (size_t k = 0; k < batches.size(); ++k) {
        const ImageBatch& b = batches[k];
        const int64_t bs = (!drop_last && k == 4) ? 5 : 8;
        EXPECT_EQ(b.images.shape(), (Shape{bs, 3, 5, 7}));
        EXPECT_EQ(b.images.dtype(), DType::F32);
        EXPECT_EQ(b.labels.dtype(), DType::I64);
        ASSERT_EQ(static_cast<int64_t>(b.indices.size()), bs);
        for (int64_t i = 0; i < bs; ++i) EXPECT_EQ(b.labels.data<int64_t>()[i], set->labels[b.indices[i]]);
        seen.insert(seen.end(), b.indices.begin(), b.indices.end());
      }
      const std::vector<int64_t> order = epoch_order(37, shuffle, o.seed, 3);
      EXPECT_EQ(seen, std::vector<int64_t>(order.begin(), order.begin() + static_cast<int64_t>(seen.size())));
      std::sort(seen.begin(), seen.end());
      EXPECT_TRUE(std::adjacent_find(seen.begin(), seen.end()) == seen.end()) << "an example twice";
      EXPECT_EQ(seen.size(), drop_last ? 32u : 37u);
      if (!shuffle) {
        for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(order[i], static_cast<int64_t>(i));
      }
    }
  }
}

TEST(ImageLoader, SameBatchesForAnyWorkerCount) {
  const auto set = random_set(45, 6, 6);
  ImageLoader serial(set, small_options(0));
  ImageLoader one(set, small_options(1));
  ImageLoader three(set, small_options(3));
  for (int64_t epoch : {0, 1}) {
    const auto ref = run_epoch(serial, epoch);
    expect_same_batches(run_epoch(one, epoch), ref);
    expect_same_batches(run_epoch(three, epoch), ref);
  }
}

TEST(ImageLoader, StartBatchResumesExactly) {
  const auto set = random_set(45, 6, 6);
  ImageLoader loader(set, small_options(3));
  const auto full = run_epoch(loader, 4);
  for (int64_t k : {1, 3, 5}) {
    const auto tail = run_epoch(loader, 4, k);
    expect_same_batches(tail, std::vector<ImageBatch>(full.begin() + k, full.end()));
  }
  EXPECT_TRUE(run_epoch(loader, 4, loader.batches_per_epoch()).empty());
  // An epoch abandoned part way, with batches still being built, does not leak into the next.
  ImageLoaderOptions slow = small_options(3);
  slow.batch_transform = [](ImageBatch&, int64_t epoch, int64_t) {
    if (epoch == 7) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  };
  ImageLoader abandoned(set, slow);
  abandoned.start_epoch(7);
  ImageBatch b;
  ASSERT_TRUE(abandoned.next(b));
  expect_same_batches(run_epoch(abandoned, 4), full);
  EXPECT_THROW(loader.start_epoch(4, loader.batches_per_epoch() + 1), Error);
  EXPECT_THROW(loader.start_epoch(-1), Error);
}

TEST(ImageLoader, EpochsAndSeedsDiffer) {
  const auto set = random_set(64, 6, 6);
  ImageLoader loader(set, small_options(1));
  const auto e0 = run_epoch(loader, 0), e1 = run_epoch(loader, 1);
  EXPECT_NE(e0[0].indices, e1[0].indices);
  EXPECT_NE(epoch_order(64, true, 99, 0), epoch_order(64, true, 100, 0));
  // Same examples in the same places, different augmentation draws per epoch.
  ImageLoaderOptions o = small_options(0);
  o.shuffle = false;
  ImageLoader fixed(set, o);
  const auto f0 = run_epoch(fixed, 0), f1 = run_epoch(fixed, 1);
  EXPECT_EQ(f0[0].indices, f1[0].indices);
  EXPECT_FALSE(floats(f0[0].images) == floats(f1[0].images));
}

// The derivations documented in image_loader.h, written out here from the header's text.
TEST(ImageLoader, DrawsFollowTheDocumentedDerivation) {
  const uint64_t seed = 0x123456789abcdefull;
  {
    std::vector<int64_t> want(50);
    for (int64_t i = 0; i < 50; ++i) want[i] = i;
    PhiloxStream rng(seed, 6);
    for (int64_t i = 49; i > 0; --i) {
      const uint64_t hi = rng.next_u32(), lo = rng.next_u32();
      std::swap(want[i], want[((hi << 32) | lo) % static_cast<uint64_t>(i + 1)]);
    }
    EXPECT_EQ(epoch_order(50, true, seed, 6), want);
  }
  ImageAugment aug;
  aug.random_crop_padding = 4;
  aug.horizontal_flip = true;
  std::vector<int> offsets(9, 0);
  int flips = 0;
  const int64_t positions = 4000;
  for (int64_t p = 0; p < positions; ++p) {
    const uint32_t ctr[4] = {static_cast<uint32_t>(p), 0u, 3u, 0x41554731u};
    uint32_t w[4];
    philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), w);
    const AugmentDraw d = augment_draw(aug, seed, 3, p);
    ASSERT_EQ(d.dy, static_cast<int64_t>((uint64_t{w[0]} * 9) >> 32)) << p;
    ASSERT_EQ(d.dx, static_cast<int64_t>((uint64_t{w[1]} * 9) >> 32)) << p;
    ASSERT_EQ(d.flip, w[2] >= 0x80000000u) << p;
    ++offsets[d.dy];
    ++offsets[d.dx];
    flips += d.flip;
  }
  for (int o = 0; o < 9; ++o) EXPECT_NEAR(offsets[o], 2 * positions / 9.0, 120) << "offset " << o;
  EXPECT_NEAR(flips, positions / 2.0, 150);
  aug.horizontal_flip = false;
  EXPECT_FALSE(augment_draw(aug, seed, 3, 5).flip);
  const AugmentDraw none = augment_draw(ImageAugment{}, seed, 3, 5);
  EXPECT_EQ(none.dy + none.dx, 0);
}

TEST(ImageLoader, NormalisationIsToTensorThenNormalizeInF32) {
  auto set = random_set(1, 2, 3);
  const uint8_t known[3] = {255, 128, 0};  // pixel (y=1, x=2)
  std::memcpy(set->pixels.data() + (1 * 3 + 2) * 3, known, 3);
  ImageLoaderOptions o;
  o.batch_size = 1;
  o.workers = 0;
  ImageLoader loader(set, o);
  const auto b = run_epoch(loader, 0);
  ASSERT_EQ(b.size(), 1u);
  const float* img = b[0].images.data<float>();
  for (int c = 0; c < 3; ++c) {
    const float got = img[(c * 2 + 1) * 3 + 2];  // CHW
    EXPECT_EQ(got, (static_cast<float>(known[c]) / 255.0f - o.mean[c]) / o.std[c]) << "channel " << c;
    EXPECT_NEAR(got, (known[c] / 255.0 - o.mean[c]) / o.std[c], 1e-6) << "channel " << c;
  }
  EXPECT_NEAR(img[(0 * 2 + 1) * 3 + 2], (1.0 - 0.4914) / 0.2470, 1e-5);  // CIFAR-10 defaults
}

// RandomCrop(padding=P) then RandomHorizontalFlip then ToTensor + Normalize, written directly:
// pad into a zero image, cut the window, mirror it, normalise each value.
std::vector<float> reference_example(const ImageSet& s, int64_t idx, int64_t pad, const AugmentDraw& d,
                                     const ImageLoaderOptions& o) {
  const int64_t h = s.height, w = s.width, ch = s.channels, ph = h + 2 * pad, pw = w + 2 * pad;
  std::vector<uint8_t> padded(static_cast<size_t>(ph * pw * ch), 0);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < ch; ++c) padded[((y + pad) * pw + x + pad) * ch + c] = s.image(idx)[(y * w + x) * ch + c];
  std::vector<float> out(static_cast<size_t>(ch * h * w));
  for (int64_t c = 0; c < ch; ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t cx = d.flip ? w - 1 - x : x;
        const uint8_t v = padded[((y + d.dy) * pw + cx + d.dx) * ch + c];
        out[(c * h + y) * w + x] = (static_cast<float>(v) / 255.0f - o.mean[c]) / o.std[c];
      }
  return out;
}

TEST(ImageLoader, CropAndFlipMatchReference) {
  for (int64_t pad : {1, 3, 4, 9}) {
    const auto set = random_set(40, 8, 10);
    ImageLoaderOptions o = small_options(2);
    o.augment.random_crop_padding = pad;
    ImageLoader loader(set, o);
    int flipped = 0, shifted = 0;
    for (int64_t epoch : {0, 5}) {
      const auto batches = run_epoch(loader, epoch);
      for (size_t k = 0; k < batches.size(); ++k) {
        const std::vector<float> got = floats(batches[k].images);
        for (size_t i = 0; i < batches[k].indices.size(); ++i) {
          const int64_t pos = static_cast<int64_t>(k) * o.batch_size + static_cast<int64_t>(i);
          const AugmentDraw d = augment_draw(o.augment, o.seed, epoch, pos);
          flipped += d.flip;
          shifted += d.dy != pad || d.dx != pad;
          const auto want = reference_example(*set, batches[k].indices[i], pad, d, o);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + static_cast<int64_t>(i * want.size())))
              << "pad " << pad << " epoch " << epoch << " position " << pos << " dy " << d.dy << " dx " << d.dx
              << " flip " << d.flip;
        }
      }
    }
    EXPECT_GT(flipped, 10);
    EXPECT_GT(shifted, 40);
  }
}

TEST(ImageLoader, DestructorJoinsMidEpoch) {
  const auto set = random_set(200, 6, 6);
  ImageLoaderOptions o = small_options(3);
  o.prefetch = 4;
  o.batch_transform = [](ImageBatch&, int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers busy at destruction
  };
  for (int round = 0; round < 3; ++round) {
    ImageLoader loader(set, o);
    loader.start_epoch(round);
    ImageBatch b;
    ASSERT_TRUE(loader.next(b));
  }
  ImageLoader never_started(set, o);  // workers idle, no epoch
}

TEST(ImageLoader, PrefetchWindowIsBounded) {
  const auto set = random_set(200, 6, 6);
  ImageLoaderOptions o = small_options(3);
  o.prefetch = 2;
  std::atomic<int> built{0};
  o.batch_transform = [&](ImageBatch&, int64_t, int64_t) { ++built; };
  ImageLoader loader(set, o);
  loader.start_epoch(0);
  for (int i = 0; i < 1000 && built.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(built.load(), 2);  // not more than prefetch ahead of a consumer that takes nothing
  ImageBatch b;
  ASSERT_TRUE(loader.next(b));
  for (int i = 0; i < 1000 && built.load() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(built.load(), 3);
}

TEST(ImageLoader, WorkerErrorSurfacesInNext) {
  const auto set = random_set(40, 4, 4);
  for (int workers : {0, 2}) {
    ImageLoaderOptions o = small_options(workers);
    o.batch_transform = [](ImageBatch& b, int64_t epoch, int64_t k) {
      LB_CHECK(k != 2, "transform failed on batch ", k, " of epoch ", epoch);
      b.images.fill_(static_cast<double>(k));
    };
    ImageLoader loader(set, o);
    loader.start_epoch(1);
    ImageBatch b;
    ASSERT_TRUE(loader.next(b));
    ASSERT_TRUE(loader.next(b));
    try {
      loader.next(b);
      ADD_FAILURE() << "no error from batch 2 (" << workers << " workers)";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("transform failed on batch 2 of epoch 1"), std::string::npos) << e.what();
    }
    ASSERT_TRUE(loader.next(b));  // the loader goes on with the following batch
    EXPECT_EQ(b.images.data<float>()[0], 3.0f);
  }
}

TEST(ImageLoader, BadOptionsAndSets) {
  const auto set = random_set(10, 4, 4);
  auto bad = [&](const std::function<void(ImageLoaderOptions&)>& edit, const std::string& what) {
    ImageLoaderOptions o = small_options(1);
    edit(o);
    try {
      ImageLoader loader(set, o);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  bad([](ImageLoaderOptions& o) { o.batch_size = 0; }, "batch_size must be positive");
  bad([](ImageLoaderOptions& o) { o.mean = {0.5f}; }, "mean and std need 3 values");
  bad([](ImageLoaderOptions& o) { o.std[1] = 0.f; }, "std values must be positive");
  bad([](ImageLoaderOptions& o) { o.prefetch = 0; }, "prefetch must be >= 1");
  bad([](ImageLoaderOptions& o) { o.batch_size = 11; o.drop_last = true; }, "leaves no batch");
  auto short_set = std::make_shared<ImageSet>(*set);
  short_set->pixels.pop_back();
  EXPECT_THROW(ImageLoader(short_set, small_options(0)), Error);
  auto bad_label = std::make_shared<ImageSet>(*set);
  bad_label->labels[7] = 4;
  try {
    ImageLoader loader(bad_label, small_options(0));
    ADD_FAILURE() << "label 4 of 4 classes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 4 of image 7 outside [0, 4)"), std::string::npos) << e.what();
  }
  ImageLoader loader(set, small_options(1));
  ImageBatch b;
  EXPECT_THROW(loader.next(b), Error);  // before start_epoch
}

// Batch preparation at the trainer's size (64 CIFAR-like 32x32x3 images, crop 4 + flip) on
// the caller's thread: wait_ms with workers = 0 is the build time. Printed, not asserted.
TEST(ImageLoader, BatchPreparationTiming) {
  const auto set = random_set(64 * 50, 32, 32);
  ImageLoaderOptions o;
  o.workers = 0;
  o.augment = {4, true};
  ImageLoader loader(set, o);
  EXPECT_EQ(static_cast<int64_t>(run_epoch(loader, 0).size()), 50);  // warm-up (allocator cache)
  loader.reset_wait();
  EXPECT_EQ(loader.wait_ms(), 0.0);
  EXPECT_EQ(static_cast<int64_t>(run_epoch(loader, 1).size()), 50);
  EXPECT_GT(loader.wait_ms(), 0.0);
  std::printf("ImageLoader batch of 64 32x32x3 (crop 4, flip, normalise), 1 thread: %.3f ms\n",
              loader.wait_ms() / 50.0);
}

}  // namespace
}  // namespace lb::data
