// The CPU allocator (lb/core/allocator.h). Blocks under 64 KiB come from malloc. Larger ones
// are mapped and unmapped by this allocator (mmap/munmap), so what it frees leaves the process:
// through malloc, glibc's adaptive mmap threshold rises to 32 MiB after the first large free,
// and from then on freed blocks stay in its arenas, counted by RSS and by nothing else.
//
// Freed large blocks are cached for reuse (a fresh block costs a mapping, page faults on
// first touch and an unmapping, every step). Blocks are page ranges, so they split and grow
// without losing their pages: a request takes the smallest cached block large enough and
// leaves its tail cached; with none large enough, the largest grows (mremap) and only the
// growth is faulted in. With shapes that vary every step (dynamic padding), this faults no
// more than glibc's heap did, which kept every byte it was ever given.
// The cache is bounded twice:
// - what the large blocks hold, live and cached, stays within the highest the live ones ever
//   held plus a slack (1/32 of it, at least 4 MiB): caching never makes the process larger
//   than the most its tensors needed at once. Past it, the oldest cached blocks go first.
// - the cached bytes stay within LEANBACK_CPU_CACHE_MB MiB (environment; default 4096, 0
//   disables the cache).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "lb/core/allocator.h"
#include "lb/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define LB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LB_ASAN 1
#endif
#endif
#ifndef LB_ASAN
#define LB_ASAN 0
#endif

namespace lb {
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
    void* p = rounded < kLargeMin ? small_alloc(rounded) : large_alloc(rounded);
    LB_CHECK(p != nullptr || rounded == 0, "out of host memory allocating ", nbytes, " bytes (",
             mem_tag_name(tag), ")");
    count_alloc(nbytes, tag);
    return p;
  }

  void deallocate(void* p, size_t nbytes, MemTag tag) override {
    count_free(nbytes, tag);
    if (p == nullptr) return;
    if (block_size(nbytes) < kLargeMin) return std::free(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto live = live_.find(p);
    LB_CHECK(live != live_.end(), "freeing a host block this allocator did not hand out");
    const size_t size = live->second;  // may exceed this request (a larger cached block was reused)
    live_.erase(live);
    live_bytes_ -= size;
    if (cached_ + size > limit_) return unmap(p, size);
    cache(p, size);
    trim_locked();
  }

  MemStats stats() const override {
    MemStats s = Allocator::stats();
    std::lock_guard<std::mutex> lock(mu_);
    s.cached = static_cast<int64_t>(cached_);
    return s;
  }

  void release_cached() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, c] : free_) unmap(c.p, size);
    free_.clear();
    cached_ = 0;
  }

 private:
  static constexpr size_t kLargeMin = 64 << 10;
  static constexpr size_t kSlackMin = 4 << 20;
  struct Cached {
    void* p;
    uint64_t seq;  // order of freeing: the oldest is trimmed first
  };

  // 64-byte multiples (AVX-512 loads); large sizes are rounded up to 16 classes per power of
  // two (at most 1/16 wasted, whole pages) so that near sizes share blocks.
  static size_t block_size(size_t n) {
    const size_t r = (n + 63) / 64 * 64;
    if (r < kLargeMin) return r;
    const size_t step = std::max<size_t>(4096, std::bit_floor(r) / 16);
    return (r + step - 1) / step * step;
  }

  static void* small_alloc(size_t rounded) { return rounded ? std::aligned_alloc(64, rounded) : nullptr; }

#if LB_ASAN
  // Under AddressSanitizer through malloc, whose blocks it guards (an overflow past a mapping
  // would go unseen).
  static void* map(size_t size) { return std::aligned_alloc(64, size); }
  static void unmap(void* p, size_t) { std::free(p); }
  static void* resize(void*, size_t, size_t) { return nullptr; }
  static constexpr bool kCanSplit = false;
#else
  static void* map(size_t size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  static void unmap(void* p, size_t size) { ::munmap(p, size); }
  // The block at p, of `from` bytes, as `to` bytes: its pages kept (moved, not copied, where it
  // must move to grow), the tail unmapped when it shrinks. nullptr when it cannot.
  static void* resize(void* p, size_t from, size_t to) {
    void* q = ::mremap(p, from, to, MREMAP_MAYMOVE);
    return q == MAP_FAILED ? nullptr : q;
  }
  // Any page range of a mapping can be unmapped or remapped alone, so a block splits into two.
  static constexpr bool kCanSplit = true;
#endif

  // The smallest cached block that is large enough, its tail split off into a cached block of
  // its own; else the largest cached block grown to the request (mremap keeps its pages: only
  // the growth is faulted in); a fresh mapping when the cache is empty. Without splitting
  // (AddressSanitizer), a cached block serves requests down to half its size.
  void* large_alloc(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    size_t got = rounded;
    auto it = free_.lower_bound(rounded);
    if (it != free_.end() && (kCanSplit || it->first <= 2 * rounded)) {
      p = take(it, got);
      if (kCanSplit && got - rounded >= kLargeMin) {
        cache(static_cast<char*>(p) + rounded, got - rounded);
        got = rounded;
      }
    } else if (kCanSplit && !free_.empty()) {
      size_t had = 0;
      void* old = take(std::prev(free_.end()), had);
      p = resize(old, had, rounded);
      if (p == nullptr) unmap(old, had);
    }
    if (p == nullptr) {
      p = map(rounded);
      got = rounded;
    }
    if (p == nullptr) {  // maybe the cache holds the memory we need
      for (auto& [size, c] : free_) unmap(c.p, size);
      free_.clear();
      cached_ = 0;
      p = map(rounded);
      if (p == nullptr) return nullptr;
    }
    live_[p] = got;
    live_bytes_ += got;
    peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
    trim_locked();
    return p;
  }

  void* take(std::multimap<size_t, Cached>::iterator it, size_t& size) {
    void* p = it->second.p;
    size = it->first;
    cached_ -= size;
    free_.erase(it);
    return p;
  }
  void cache(void* p, size_t size) {
    free_.emplace(size, Cached{p, next_seq_++});
    cached_ += size;
  }

  // Unmaps the oldest cached blocks while live + cached exceeds the live peak plus slack.
  void trim_locked() {
    const size_t bound = peak_live_bytes_ + std::max(kSlackMin, peak_live_bytes_ / 16);
    while (!free_.empty() && live_bytes_ + cached_ > bound) {
      auto oldest = free_.begin();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second.seq < oldest->second.seq) oldest = it;
      unmap(oldest->second.p, oldest->first);
      cached_ -= oldest->first;
      free_.erase(oldest);
    }
  }

  mutable std::mutex mu_;
  std::multimap<size_t, Cached> free_;      // block size -> cached block
  std::unordered_map<void*, size_t> live_;  // large blocks in use -> their block size
  size_t cached_ = 0;
  size_t live_bytes_ = 0;
  size_t peak_live_bytes_ = 0;
  uint64_t next_seq_ = 0;
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
