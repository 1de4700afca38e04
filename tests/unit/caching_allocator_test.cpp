// The device caching allocator's logic on a fake device (fake addresses, a capacity): reuse,
// pools, best fit, split and merge, free-and-retry on out of memory, the OOM message, the
// per-tag accounting, and a randomised run checking the invariants after every call. The
// CUDA build runs the same class over cudaMalloc (cuda/caching_allocator.cu).
#include "lb/core/caching_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "lb/core/error.h"

namespace lb {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

// Hands out address ranges it never touches; fails past its capacity like cudaMalloc.
class FakeDevice final : public DeviceMemory {
 public:
  explicit FakeDevice(size_t capacity) : capacity_(capacity) {}
  ~FakeDevice() override { EXPECT_TRUE(live_.empty()) << live_.size() << " segments never freed"; }
  void* raw_alloc(size_t n) override {
    if (used_ + n > capacity_) {
      ++failed_;
      return nullptr;
    }
    auto* p = reinterpret_cast<void*>(next_);
    next_ += n + 4096;  // a gap: blocks of different segments are never adjacent
    used_ += n;
    live_.emplace(p, n);
    ++allocs_;
    return p;
  }
  void raw_free(void* p) override {
    auto it = live_.find(p);
    ASSERT_NE(it, live_.end()) << "raw_free of an unknown segment";
    used_ -= it->second;
    live_.erase(it);
    ++frees_;
  }
  void mem_info(size_t& free_bytes, size_t& total_bytes) override {
    free_bytes = capacity_ - used_;
    total_bytes = capacity_;
  }
  std::string name() const override { return "fake:0"; }

  size_t allocs_ = 0, frees_ = 0, failed_ = 0, used_ = 0;

 private:
  size_t capacity_;
  uintptr_t next_ = uintptr_t{1} << 32;
  std::map<void*, size_t> live_;
};

char* addr(void* p) { return static_cast<char*>(p); }

TEST(CachingAllocator, RoundsSizesAndPicksSegments) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(11 * MiB), 12 * MiB);
}

TEST(CachingAllocator, FreedBlockIsReusedWithoutARawAllocation) {
  FakeDevice dev(1024 * MiB);
  CachingAllocator a(dev);
  void* p = a.allocate(64 * MiB, MemTag::Other);
  a.deallocate(p, 64 * MiB, MemTag::Other);
  void* q = a.allocate(64 * MiB, MemTag::Saved);
  EXPECT_EQ(p, q);
  EXPECT_EQ(dev.allocs_, 1u);
  a.deallocate(q, 64 * MiB, MemTag::Saved);
  a.check_invariants();
}

TEST(CachingAllocator, SmallRequestsShareASegment) {
  FakeDevice dev(1024 * MiB);
  CachingAllocator a(dev);
  void* p = a.allocate(1000, MemTag::Other);
  void* q = a.allocate(3000, MemTag::Other);
  EXPECT_EQ(dev.allocs_, 1u);
  EXPECT_EQ(a.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(addr(q) - addr(p), 1024);  // 1000 rounded to 1024, the next block right after
  EXPECT_EQ(a.block_of(q).second, 3072u);
  EXPECT_EQ(a.block_bytes_in_use(), 4096u);
  a.check_invariants();
  a.deallocate(p, 1000, MemTag::Other);
  a.deallocate(q, 3000, MemTag::Other);
  a.check_invariants();
}

TEST(CachingAllocator, LargeAndSmallPoolsStayApart) {
  FakeDevice dev(1024 * MiB);
  CachingAllocator a(dev);
  void* big = a.allocate(4 * MiB, MemTag::Other);  // a 20 MiB segment
  a.deallocate(big, 4 * MiB, MemTag::Other);
  void* small = a.allocate(4 * KiB, MemTag::Other);  // not carved from the free 20 MiB
  EXPECT_EQ(dev.allocs_, 2u);
  EXPECT_EQ(a.reserved_bytes(), 22 * MiB);
  a.deallocate(small, 4 * KiB, MemTag::Other);
  a.check_invariants();
}

TEST(CachingAllocator, SplitBlocksMergeBackIntoOneSegment) {
  FakeDevice dev(1024 * MiB);
  CachingAllocator a(dev);
  void* p[4];
  for (auto& x : p) x = a.allocate(100 * KiB, MemTag::Other);
  EXPECT_EQ(a.segment_count(), 1u);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(addr(p[i]) - addr(p[i - 1]), static_cast<ptrdiff_t>(100 * KiB));
  // Free in an order that needs both left and right merges.
  for (int i : {1, 3, 2, 0}) {
    a.deallocate(p[i], 100 * KiB, MemTag::Other);
    a.check_invariants();
  }
  // Merged whole: the segment gives back, and a 2 MiB-minus-nothing request fits it again.
  void* whole = a.allocate(MiB, MemTag::Other);
  EXPECT_EQ(whole, p[0]);
  EXPECT_EQ(dev.allocs_, 1u);
  a.deallocate(whole, MiB, MemTag::Other);
  a.release_cached();
  EXPECT_EQ(a.segment_count(), 0u);
  EXPECT_EQ(dev.frees_, 1u);
}

TEST(CachingAllocator, BestFitTakesTheSmallestFreeBlockThatFits) {
  FakeDevice dev(1024 * MiB);
  CachingAllocator a(dev);
  // Three large segments of their own, freed: 12, 16 and 14 MiB.
  void* s12 = a.allocate(12 * MiB, MemTag::Other);
  void* s16 = a.allocate(16 * MiB, MemTag::Other);
  void* s14 = a.allocate(14 * MiB, MemTag::Other);
  a.deallocate(s12, 12 * MiB, MemTag::Other);
  a.deallocate(s16, 16 * MiB, MemTag::Other);
  a.deallocate(s14, 14 * MiB, MemTag::Other);
  void* p = a.allocate(13 * MiB, MemTag::Other);
  EXPECT_EQ(p, s14);  // not the 16; the 1 MiB rest is not split off (large pool: > 1 MiB only)
  EXPECT_EQ(a.block_of(p).second, 14 * MiB);
  void* q = a.allocate(10 * MiB, MemTag::Other);
  EXPECT_EQ(q, s12);  // the 2 MiB rest is split off and stays free
  EXPECT_EQ(a.block_of(q).second, 10 * MiB);
  EXPECT_EQ(dev.allocs_, 3u);
  a.check_invariants();
  a.deallocate(p, 13 * MiB, MemTag::Other);
  a.deallocate(q, 10 * MiB, MemTag::Other);
  a.check_invariants();
}

TEST(CachingAllocator, OutOfMemoryGivesBackCachedSegmentsAndRetries) {
  FakeDevice dev(40 * MiB);
  CachingAllocator a(dev);
  void* p = a.allocate(24 * MiB, MemTag::Other);
  a.deallocate(p, 24 * MiB, MemTag::Other);  // cached: 24 of the device's 40 MiB
  void* q = a.allocate(32 * MiB, MemTag::Gradient);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(dev.failed_, 1u);  // the first try failed, the retry after the release worked
  EXPECT_EQ(dev.frees_, 1u);
  EXPECT_EQ(a.reserved_bytes(), 32 * MiB);
  a.deallocate(q, 32 * MiB, MemTag::Gradient);
  a.check_invariants();
}

TEST(CachingAllocator, OutOfMemoryMessageNamesWhatHoldsTheDevice) {
  FakeDevice dev(40 * MiB);
  CachingAllocator a(dev);
  // Segments: 12 MiB for w; 20 MiB for s1 and s2 (split, 10 MiB of it free); 16 more fail.
  void* w = a.allocate(12 * MiB, MemTag::Parameter);
  void* s1 = a.allocate(6 * MiB, MemTag::Other);
  void* s2 = a.allocate(4 * MiB, MemTag::Other);
  a.retag_block(s1, 6 * MiB, MemTag::Other, MemTag::Saved);  // as Storage::set_tag does
  a.retag_block(s2, 4 * MiB, MemTag::Other, MemTag::Saved);
  try {
    a.allocate(16 * MiB, MemTag::Workspace);
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fake:0 out of memory: requested 16.0 MiB (workspace"), std::string::npos) << m;
    EXPECT_NE(m.find("the device has 8.0 MiB free of 40.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("live tensors hold 22.0 MiB (parameter 12.0 MiB, saved 10.0 MiB)"), std::string::npos) << m;
    EXPECT_NE(m.find("reserves 32.0 MiB (10.0 MiB cached"), std::string::npos) << m;
    EXPECT_NE(m.find("2 tensors saved for backward hold 10.0 MiB, the largest: 6.0 MiB, 4.0 MiB"), std::string::npos)
        << m;
  }
  // Nothing was lost: the live blocks are intact and still free normally.
  a.check_invariants();
  a.deallocate(w, 12 * MiB, MemTag::Parameter);
  a.deallocate(s1, 6 * MiB, MemTag::Saved);
  a.deallocate(s2, 4 * MiB, MemTag::Saved);
  EXPECT_EQ(a.stats().total_current, 0);
}

TEST(CachingAllocator, AccountsRequestedBytesPerTagAndCachedBytes) {
  FakeDevice dev(1024 * MiB);
  CachingAllocator a(dev);
  void* p = a.allocate(1000, MemTag::Parameter);
  void* q = a.allocate(3 * MiB, MemTag::Saved);
  MemStats s = a.stats();
  EXPECT_EQ(s.current[static_cast<int>(MemTag::Parameter)], 1000);
  EXPECT_EQ(s.current[static_cast<int>(MemTag::Saved)], static_cast<int64_t>(3 * MiB));
  EXPECT_EQ(s.total_current, static_cast<int64_t>(3 * MiB + 1000));
  EXPECT_EQ(s.cached, static_cast<int64_t>(a.reserved_bytes() - a.block_bytes_in_use()));
  a.deallocate(q, 3 * MiB, MemTag::Saved);
  s = a.stats();
  EXPECT_EQ(s.total_current, 1000);
  EXPECT_EQ(s.peak[static_cast<int>(MemTag::Saved)], static_cast<int64_t>(3 * MiB));
  EXPECT_EQ(s.cached, static_cast<int64_t>(22 * MiB - 1024));
  EXPECT_THROW(a.deallocate(q, 3 * MiB, MemTag::Saved), Error);  // no longer live
  a.deallocate(p, 1000, MemTag::Parameter);
  EXPECT_EQ(a.allocate(0, MemTag::Other), nullptr);
}

TEST(CachingAllocator, RandomAllocationsKeepTheInvariants) {
  FakeDevice dev(512 * MiB);
  std::mt19937_64 rng(7);
  {
    CachingAllocator a(dev);
    struct Live {
      void* p;
      size_t n;
    };
    std::vector<Live> live;
    std::uniform_int_distribution<int> coin(0, 99);
    auto size = [&] {
      const int kind = coin(rng);
      if (kind < 60) return std::uniform_int_distribution<size_t>(1, 256 * KiB)(rng);
      if (kind < 90) return std::uniform_int_distribution<size_t>(MiB, 12 * MiB)(rng);
      return std::uniform_int_distribution<size_t>(12 * MiB, 48 * MiB)(rng);
    };
    for (int step = 0; step < 3000; ++step) {
      if (live.empty() || coin(rng) < 55) {
        const size_t n = size();
        try {
          live.push_back({a.allocate(n, MemTag::Other), n});
        } catch (const Error&) {
          continue;  // the fake device is full: a valid answer
        }
        // No two live blocks overlap.
        const auto [p, sz] = a.block_of(live.back().p);
        ASSERT_GE(sz, n);
        for (size_t i = 0; i + 1 < live.size(); ++i) {
          const auto [o, osz] = a.block_of(live[i].p);
          ASSERT_TRUE(addr(p) + sz <= addr(o) || addr(o) + osz <= addr(p));
        }
      } else {
        const size_t i = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
        a.deallocate(live[i].p, live[i].n, MemTag::Other);
        live[i] = live.back();
        live.pop_back();
      }
      if (step % 7 == 0) a.check_invariants();
      if (step % 500 == 499) a.release_cached();
    }
    a.check_invariants();
    for (const auto& l : live) a.deallocate(l.p, l.n, MemTag::Other);
    a.check_invariants();
    EXPECT_EQ(a.block_bytes_in_use(), 0u);
    a.release_cached();
    EXPECT_EQ(a.segment_count(), 0u);
  }
  EXPECT_EQ(dev.used_, 0u);
}

}  // namespace
}  // namespace lb
