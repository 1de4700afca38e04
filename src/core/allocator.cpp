// CPU allocator (64-byte aligned) and per-tag byte accounting shared by all allocators.
#include "lb/core/allocator.h"

#include <cstdlib>
#include <new>

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

static void raise_peak(std::atomic<int64_t>& peak, int64_t v) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

void Allocator::count_alloc(size_t n, MemTag tag) {
  const int i = static_cast<int>(tag);
  raise_peak(peak_[i], current_[i].fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n));
  raise_peak(total_peak_, total_current_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n));
}

void Allocator::count_free(size_t n, MemTag tag) {
  current_[static_cast<int>(tag)].fetch_sub(static_cast<int64_t>(n));
  total_current_.fetch_sub(static_cast<int64_t>(n));
}

void Allocator::retag(size_t n, MemTag from, MemTag to) {
  if (from == to) return;
  current_[static_cast<int>(from)].fetch_sub(static_cast<int64_t>(n));
  const int i = static_cast<int>(to);
  raise_peak(peak_[i], current_[i].fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n));
}

MemStats Allocator::stats() const {
  MemStats s;
  for (int i = 0; i < kNumMemTags; ++i) {
    s.current[i] = current_[i].load();
    s.peak[i] = peak_[i].load();
  }
  s.total_current = total_current_.load();
  s.total_peak = total_peak_.load();
  return s;
}

void Allocator::reset_peak() {
  for (int i = 0; i < kNumMemTags; ++i) peak_[i].store(current_[i].load());
  total_peak_.store(total_current_.load());
}

namespace {
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, MemTag tag) override {
    const size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
    LB_CHECK(p != nullptr || rounded == 0, "out of host memory allocating ", nbytes, " bytes (",
             mem_tag_name(tag), ")");
    count_alloc(nbytes, tag);
    return p;
  }
  void deallocate(void* p, size_t nbytes, MemTag tag) override {
    std::free(p);
    count_free(nbytes, tag);
  }
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator a;
  return a;
}

}  // namespace lb
