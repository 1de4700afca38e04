// CPU allocator (64-byte aligned) and per-tag byte accounting shared by all allocators.
#include "lb/core/allocator.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <bit>
#include <mutex>
#include <unordered_map>
#include <new>
#include <string>

#include "lb/core/error.h"

namespace lb {

const char* mem_tag_name(MemTag t) {
  switch (t) {
    case MemTag::Parameter: return "parameter";
    case MemTag::Buffer: return "buffer";
    case MemTag::Gradient: return "gradient";
    case MemTag::Optimizer: return "optimizer";
    case MemTag::Saved: return "saved";
    case MemTag::Workspace: return "workspace";
    case MemTag::Other: return "other";
  }
  return "?";
}

// Returns whether v became the peak.
static bool raise_peak(std::atomic<int64_t>& peak, int64_t v) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p) {
    if (peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) return true;
  }
  return false;
}

void Allocator::add_activation(int64_t n) {
  if (!raise_peak(activation_peak_, activation_current_.fetch_add(n) + n)) return;
  activation_peak_rises_.fetch_add(1, std::memory_order_relaxed);
  // A new activation peak: what each tag held then (read without a lock; another thread's
  // allocation in between shifts it by that allocation at most).
  for (int i = 0; i < kNumMemTags; ++i) at_activation_peak_[i].store(current_[i].load(std::memory_order_relaxed));
}

void Allocator::count_alloc(size_t n, MemTag tag) {
  const int i = static_cast<int>(tag);
  raise_peak(peak_[i], current_[i].fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n));
  raise_peak(total_peak_, total_current_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n));
  if (is_activation_tag(tag)) add_activation(static_cast<int64_t>(n));
}

void Allocator::count_free(size_t n, MemTag tag) {
  current_[static_cast<int>(tag)].fetch_sub(static_cast<int64_t>(n));
  total_current_.fetch_sub(static_cast<int64_t>(n));
  if (is_activation_tag(tag)) activation_current_.fetch_sub(static_cast<int64_t>(n));
}

void Allocator::retag(size_t n, MemTag from, MemTag to) {
  if (from == to) return;
  current_[static_cast<int>(from)].fetch_sub(static_cast<int64_t>(n));
  const int i = static_cast<int>(to);
  raise_peak(peak_[i], current_[i].fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n));
  if (is_activation_tag(from) != is_activation_tag(to))
    is_activation_tag(to) ? add_activation(static_cast<int64_t>(n))
                          : void(activation_current_.fetch_sub(static_cast<int64_t>(n)));
}

MemStats Allocator::stats() const {
  MemStats s;
  for (int i = 0; i < kNumMemTags; ++i) {
    s.current[i] = current_[i].load();
    s.peak[i] = peak_[i].load();
  }
  s.total_current = total_current_.load();
  s.total_peak = total_peak_.load();
  s.activation_current = activation_current_.load();
  s.activation_peak = activation_peak_.load();
  for (int i = 0; i < kNumMemTags; ++i) s.at_activation_peak[i] = at_activation_peak_[i].load();
  return s;
}

void Allocator::reset_activation_peak() {
  activation_peak_.store(activation_current_.load());
  for (int i = 0; i < kNumMemTags; ++i) at_activation_peak_[i].store(current_[i].load());
}

void Allocator::reset_peak() {
  for (int i = 0; i < kNumMemTags; ++i) peak_[i].store(current_[i].load());
  total_peak_.store(total_current_.load());
  reset_activation_peak();
}

namespace {
class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    if (const char* env = std::getenv("LEANBACK_CPU_CACHE_MB")) {
      try {
        limit_ = static_cast<size_t>(std::stoull(env)) << 20;
      } catch (const std::exception&) {
        LB_FAIL("LEANBACK_CPU_CACHE_MB must be a number of MiB, got '", env, "'");
      }
    }
  }
  // No destructor: storages of other static objects may be freed after this one is gone;
  // cached blocks go back to the system with the process.

  void* allocate(size_t nbytes, MemTag tag) override {
    // More than the machine has can never succeed (and would only be overcommitted, then
    // killed on first touch): a named error instead.
    static const size_t physical = static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) *
                                   static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    LB_CHECK(physical == 0 || nbytes <= physical, "cannot allocate ", nbytes, " bytes (",
             static_cast<double>(nbytes) / static_cast<double>(1ull << 30), " GiB, ", mem_tag_name(tag),
             ") on the host: the machine has ", static_cast<double>(physical) / static_cast<double>(1ull << 30),
             " GiB of memory");
    const size_t rounded = block_size(nbytes);
    void* p = nullptr;
    size_t got = rounded;
    if (rounded >= kCacheMin) {
      std::lock_guard<std::mutex> lock(mu_);
      // Best fit among cached blocks up to twice the request: varying shapes (dynamic
      // padding: every batch has its own sequence length) then reuse memory instead of
      // faulting in fresh pages each step.
      auto it = free_.lower_bound(rounded);
      if (it != free_.end() && it->first <= 2 * rounded) {
        p = it->second;
        got = it->first;
        free_.erase(it);
        cached_ -= got;
      }
    }
    if (p == nullptr) {
      p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
      if (p == nullptr && rounded != 0) {  // maybe the cache holds the memory we need
        release_cached();
        p = std::aligned_alloc(64, rounded);
      }
    }
    LB_CHECK(p != nullptr || rounded == 0, "out of host memory allocating ", nbytes, " bytes (",
             mem_tag_name(tag), ")");
    if (rounded >= kCacheMin) {
      std::lock_guard<std::mutex> lock(mu_);
      live_[p] = got;
    }
    count_alloc(nbytes, tag);
    return p;
  }
  void deallocate(void* p, size_t nbytes, MemTag tag) override {
    count_free(nbytes, tag);
    if (p == nullptr) return;
    size_t rounded = block_size(nbytes);
    if (rounded >= kCacheMin) {
      std::lock_guard<std::mutex> lock(mu_);
      auto live = live_.find(p);
      if (live != live_.end()) {  // the block may be larger than this request asked for
        rounded = live->second;
        live_.erase(live);
      }
      if (cached_ + rounded <= limit_) {
        free_.emplace(rounded, p);
        cached_ += rounded;
        return;
      }
    }
    std::free(p);
  }
  MemStats stats() const override {
    MemStats s = Allocator::stats();
    std::lock_guard<std::mutex> lock(mu_);
    s.cached = static_cast<int64_t>(cached_);
    return s;
  }
  void release_cached() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  static constexpr size_t kCacheMin = 64 << 10;
  // 64-byte multiples (AVX-512 loads); cached sizes are rounded up to 16 classes per power
  // of two (at most 1/16 wasted) so that near sizes share blocks.
  static size_t block_size(size_t n) {
    const size_t r = (n + 63) / 64 * 64;
    if (r < kCacheMin) return r;
    const size_t step = std::max<size_t>(4096, std::bit_floor(r) / 16);
    return (r + step - 1) / step * step;
  }

  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // rounded size -> free block
  std::unordered_map<void*, size_t> live_;  // cacheable blocks in use -> their real size
  size_t cached_ = 0;
  size_t limit_ = size_t{4096} << 20;
};
}  // namespace

Allocator& cpu_allocator() {
  // Never destroyed, and on the heap: storages of other static objects may be freed after
  // any static destructor has run, and a destroyed static's cache map would leave the cached
  // blocks unreferenced, which LeakSanitizer reports as leaks. Through this pointer they stay
  // reachable until the process ends.
  static CpuAllocator* const a = new CpuAllocator;
  return *a;
}

}  // namespace lb
