// The CPU allocator's block cache: a freed large block is handed out again for a request of
// the same rounded size (no new mapping), accounting counts live tensors only while the cache
// is reported separately, small blocks are never cached, and release_cached() empties it.
#include <gtest/gtest.h>

#include "lb/core/allocator.h"
#include "lb/core/tensor.h"

namespace lb {
namespace {

TEST(CpuAllocatorCache, ReusesFreedLargeBlocksAndAccountsSeparately) {
  Allocator& a = cpu_allocator();
  a.release_cached();
  const MemStats s0 = a.stats();
  EXPECT_EQ(s0.cached, 0);
  const void* first = nullptr;
  {
    Tensor t = Tensor::empty({300000}, DType::F32);  // 1.2 MB
    first = t.raw_data();
    EXPECT_EQ(a.stats().total_current - s0.total_current, 1200000);
  }
  const MemStats s1 = a.stats();
  EXPECT_EQ(s1.total_current, s0.total_current);  // freed: not live any more
  EXPECT_GE(s1.cached, 1200000);                  // but kept for reuse
  {
    // 1 199 990 bytes rounds to the same size class.
    Tensor t = Tensor::empty({1199990}, DType::U8, Device::cpu(), MemTag::Workspace);
    EXPECT_EQ(t.raw_data(), first);
    EXPECT_EQ(a.stats().cached, s0.cached);
    EXPECT_EQ(a.stats().current[int(MemTag::Workspace)] - s0.current[int(MemTag::Workspace)],
              1199990);
  }
  a.release_cached();
  EXPECT_EQ(a.stats().cached, 0);
}

// Shapes that vary from step to step (dynamic padding) reuse a cached block up to twice their
// size, and the block goes back to the cache whole.
TEST(CpuAllocatorCache, BestFitReusesALargerBlockUpToTwice) {
  Allocator& a = cpu_allocator();
  a.release_cached();
  const void* big = nullptr;
  { Tensor t = Tensor::empty({400000}, DType::F32); big = t.raw_data(); }  // 1.6 MB
  const int64_t block = a.stats().cached;
  EXPECT_GE(block, 1600000);
  {
    Tensor t = Tensor::empty({250000}, DType::F32);  // 1.0 MB: fits, under 2x
    EXPECT_EQ(t.raw_data(), big);
    EXPECT_EQ(a.stats().cached, 0);
    EXPECT_GE(a.stats().current[int(MemTag::Other)], 1000000);
  }
  EXPECT_EQ(a.stats().cached, block);  // returned at its real size
  {
    Tensor t = Tensor::empty({100000}, DType::F32);  // 0.4 MB: would waste over half
    EXPECT_NE(t.raw_data(), big);
  }
  a.release_cached();
}

TEST(CpuAllocatorCache, SmallBlocksAreNotCached) {
  Allocator& a = cpu_allocator();
  a.release_cached();
  { Tensor t = Tensor::empty({1000}, DType::F32); }
  EXPECT_EQ(a.stats().cached, 0);
}

TEST(CpuAllocatorCache, CachedBlocksAre64ByteAligned) {
  for (int i = 0; i < 3; ++i) {
    Tensor t = Tensor::empty({100003}, DType::F32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  }
}

}  // namespace
}  // namespace lb
