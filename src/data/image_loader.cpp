// ImageLoader (see image_loader.h for the randomness and pixel conventions). Workers claim
// batch indices in order, at most `prefetch` ahead of the consumer, and build them outside
// the lock; a batch is a pure function of (order, epoch, batch index), so which worker builds
// it does not matter. start_epoch bumps a generation number: batches of an older epoch that
// finish afterwards are dropped instead of being handed out.
#include "lb/data/image_loader.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "lb/core/philox.h"
#include "lb/data/batch.h"

namespace lb::data {

namespace {

constexpr uint32_t kAugmentTag = 0x41554731u;  // "AUG1": 4th counter word of augmentation draws
constexpr int64_t kMaxEpoch = int64_t{1} << 31;

// Writes one image as normalised CHW f32, cropped at (dy, dx) of the zero-padded image and
// optionally flipped; lut[c * 256 + v] is the normalised value of pixel v in channel c.
void write_example(const uint8_t* img, int64_t h, int64_t w, int64_t ch, int64_t pad,
                   const AugmentDraw& d, const float* lut, float* dst) {
  const int64_t oy = d.dy - pad, ox = d.dx - pad;  // source = output + offset
  const int64_t x0 = std::max<int64_t>(0, -ox), x1 = std::min<int64_t>(w, w - ox);
  for (int64_t c = 0; c < ch; ++c) {
    const float* l = lut + c * 256;
    for (int64_t y = 0; y < h; ++y) {
      float* row = dst + (c * h + y) * w;
      const int64_t sy = y + oy;
      if (sy < 0 || sy >= h || x0 >= x1) {
        std::fill(row, row + w, l[0]);
        continue;
      }
      const uint8_t* src = img + sy * w * ch + c;  // src[(x + ox) * ch]: cropped column x
      // Output columns [lo, hi) come from the image, the rest from the padding.
      const int64_t lo = d.flip ? w - x1 : x0, hi = d.flip ? w - x0 : x1;
      std::fill(row, row + lo, l[0]);
      std::fill(row + hi, row + w, l[0]);
      if (d.flip) {
        for (int64_t x = x0; x < x1; ++x) row[w - 1 - x] = l[src[(x + ox) * ch]];
      } else {
        for (int64_t x = x0; x < x1; ++x) row[x] = l[src[(x + ox) * ch]];
      }
    }
  }
}

struct Prepared {
  ImageBatch batch;
  std::exception_ptr error;
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

AugmentDraw augment_draw(const ImageAugment& augment, uint64_t seed, int64_t epoch,
                         int64_t position) {
  AugmentDraw d;
  if (augment.random_crop_padding == 0 && !augment.horizontal_flip) return d;
  const auto p = static_cast<uint64_t>(position), e = static_cast<uint64_t>(epoch);
  const uint32_t ctr[4] = {static_cast<uint32_t>(p), static_cast<uint32_t>(p >> 32),
                           static_cast<uint32_t>(e), kAugmentTag};
  uint32_t w[4];
  philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), w);
  const auto range = static_cast<uint64_t>(2 * augment.random_crop_padding + 1);
  d.dy = static_cast<int64_t>((w[0] * range) >> 32);
  d.dx = static_cast<int64_t>((w[1] * range) >> 32);
  d.flip = augment.horizontal_flip && (w[2] >> 31) != 0;
  return d;
}

struct ImageLoader::Impl {
  std::shared_ptr<const ImageSet> set;
  ImageLoaderOptions opt;
  std::vector<float> lut;  // channels x 256
  int64_t num_batches = 0;

  std::mutex mu;
  std::condition_variable work_cv, ready_cv;
  bool stop = false, started = false;
  uint64_t generation = 0;
  int64_t epoch = 0;
  std::shared_ptr<const std::vector<int64_t>> order;
  int64_t next_claim = 0, next_out = 0;  // next batch to build / to hand out
  std::map<int64_t, Prepared> ready;
  std::vector<std::thread> workers;
  double wait_ms = 0.0;  // consumer thread only

  ImageBatch build(const std::vector<int64_t>& ord, int64_t e, int64_t k) const {
    const ImageSet& s = *set;
    const int64_t g = opt.batch_size * opt.shard_count, g0 = k * g, g_len = std::min(g, s.size() - g0);
    const int64_t base = g_len / opt.shard_count, extra = g_len % opt.shard_count, r = opt.shard_rank;
    const int64_t p0 = g0 + r * base + std::min(r, extra), b = base + (r < extra ? 1 : 0);
    const int64_t per_image = s.image_bytes();
    ImageBatch out;
    out.images = Tensor::empty({b, s.channels, s.height, s.width}, DType::F32);
    out.labels = Tensor::empty({b}, DType::I64);
    out.indices.resize(static_cast<size_t>(b));
    float* dst = out.images.data<float>();
    int64_t* labels = out.labels.data<int64_t>();
    for (int64_t i = 0; i < b; ++i) {
      const int64_t idx = ord[p0 + i];
      out.indices[i] = idx;
      labels[i] = s.labels[idx];
      write_example(s.image(idx), s.height, s.width, s.channels, opt.augment.random_crop_padding,
                    augment_draw(opt.augment, opt.seed, e, p0 + i), lut.data(), dst + i * per_image);
    }
    if (opt.batch_transform) opt.batch_transform(out, e, k);
    return out;
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (auto& t : workers) t.join();
  }

  void worker_loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work_cv.wait(lock, [&] {
        return stop || (started && next_claim < num_batches && next_claim - next_out < opt.prefetch);
      });
      if (stop) return;
      const int64_t k = next_claim++, e = epoch;
      const uint64_t gen = generation;
      const auto ord = order;
      lock.unlock();
      Prepared p;
      try {
        p.batch = build(*ord, e, k);
      } catch (...) {
        p.error = std::current_exception();
      }
      lock.lock();
      if (gen == generation) {
        ready.emplace(k, std::move(p));
        ready_cv.notify_one();
      }
    }
  }
};

ImageLoader::ImageLoader(std::shared_ptr<const ImageSet> set, ImageLoaderOptions opt)
    : impl_(std::make_unique<Impl>()) {
  LB_CHECK(set != nullptr, "ImageLoader: null ImageSet");
  const ImageSet& s = *set;
  const int64_t n = s.size();
  LB_CHECK(n > 0, "ImageLoader: empty ImageSet");
  LB_CHECK(s.height > 0 && s.width > 0 && s.channels > 0, "ImageLoader: image size ", s.height, "x",
           s.width, "x", s.channels, " is not positive");
  LB_CHECK(static_cast<int64_t>(s.pixels.size()) == n * s.image_bytes(), "ImageLoader: ",
           s.pixels.size(), " pixel bytes for ", n, " images of ", s.height, "x", s.width, "x",
           s.channels);
  const int64_t num_classes = static_cast<int64_t>(s.classes.size());
  for (int64_t i = 0; i < n; ++i)
    LB_CHECK(s.labels[i] >= 0 && (num_classes == 0 || s.labels[i] < num_classes),
             "ImageLoader: label ", s.labels[i], " of image ", i, " outside [0, ", num_classes, ")");
  LB_CHECK(opt.batch_size > 0, "ImageLoader: batch_size must be positive, got ", opt.batch_size);
  LB_CHECK(opt.workers >= 0, "ImageLoader: workers must be >= 0, got ", opt.workers);
  LB_CHECK(opt.prefetch >= 1, "ImageLoader: prefetch must be >= 1, got ", opt.prefetch);
  const int64_t pad = opt.augment.random_crop_padding;
  LB_CHECK(pad >= 0, "ImageLoader: random_crop_padding must be >= 0, got ", pad);
  LB_CHECK(static_cast<int64_t>(opt.mean.size()) == s.channels &&
               static_cast<int64_t>(opt.std.size()) == s.channels,
           "ImageLoader: mean and std need ", s.channels, " values (one per channel), got ",
           opt.mean.size(), " and ", opt.std.size());
  for (float v : opt.std) LB_CHECK(v > 0.f, "ImageLoader: std values must be positive, got ", v);
  LB_CHECK(opt.shard_count >= 1 && opt.shard_rank >= 0 && opt.shard_rank < opt.shard_count,
           "ImageLoader: shard ", opt.shard_rank, " of ", opt.shard_count);
  const int64_t gb = opt.batch_size * opt.shard_count;
  const int64_t batches = opt.drop_last ? n / gb : (n + gb - 1) / gb;
  LB_CHECK(batches > 0, "ImageLoader: drop_last with batch_size ", opt.batch_size,
           " larger than the ", n, " images leaves no batch");

  Impl& m = *impl_;
  m.lut.resize(static_cast<size_t>(s.channels * 256));
  for (int64_t c = 0; c < s.channels; ++c)
    for (int v = 0; v < 256; ++v)  // ToTensor then Normalize, in f32 like torchvision
      m.lut[c * 256 + v] = (static_cast<float>(v) / 255.0f - opt.mean[c]) / opt.std[c];
  m.num_batches = batches;
  m.set = std::move(set);
  m.opt = std::move(opt);
  try {
    for (int t = 0; t < m.opt.workers; ++t) m.workers.emplace_back([&m] { m.worker_loop(); });
  } catch (...) {  // could not start a thread: join those that did start before failing
    m.stop_workers();
    throw;
  }
}

ImageLoader::~ImageLoader() { impl_->stop_workers(); }

int64_t ImageLoader::batches_per_epoch() const { return impl_->num_batches; }

void ImageLoader::start_epoch(int64_t epoch, int64_t start_batch) {
  Impl& m = *impl_;
  LB_CHECK(epoch >= 0 && epoch < kMaxEpoch, "ImageLoader::start_epoch: epoch ", epoch,
           " outside [0, 2^31)");
  LB_CHECK(start_batch >= 0 && start_batch <= m.num_batches, "ImageLoader::start_epoch: start_batch ",
           start_batch, " outside [0, ", m.num_batches, "]");
  auto ord = std::make_shared<const std::vector<int64_t>>(
      epoch_order(m.set->size(), m.opt.shuffle, m.opt.seed, epoch));
  {
    std::lock_guard<std::mutex> lock(m.mu);
    ++m.generation;
    m.ready.clear();
    m.epoch = epoch;
    m.order = std::move(ord);
    m.next_claim = m.next_out = start_batch;
    m.started = true;
  }
  m.work_cv.notify_all();
}

bool ImageLoader::next(ImageBatch& out) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  LB_CHECK(m.started, "ImageLoader::next: call start_epoch first");
  if (m.next_out >= m.num_batches) return false;
  if (m.workers.empty()) {
    const int64_t k = m.next_out++;
    lock.unlock();
    const auto t0 = Clock::now();
    out = m.build(*m.order, m.epoch, k);
    m.wait_ms += ms_since(t0);
    return true;
  }
  auto it = m.ready.find(m.next_out);
  if (it == m.ready.end()) {
    const auto t0 = Clock::now();
    m.ready_cv.wait(lock, [&] { return (it = m.ready.find(m.next_out)) != m.ready.end(); });
    m.wait_ms += ms_since(t0);
  }
  Prepared p = std::move(it->second);
  m.ready.erase(it);
  ++m.next_out;
  lock.unlock();
  m.work_cv.notify_one();  // one slot of the prefetch window freed
  if (p.error) std::rethrow_exception(p.error);
  out = std::move(p.batch);
  return true;
}

double ImageLoader::wait_ms() const { return impl_->wait_ms; }

void ImageLoader::reset_wait() { impl_->wait_ms = 0.0; }

}  // namespace lb::data
