// A caching allocator for device memory (docs/design.md "Core contracts"), written against an
// abstract source of raw memory so that its logic runs, and is tested, on any machine: the
// CUDA backend plugs in cudaMalloc/cudaFree (cuda/caching_allocator.cu), the tests a fake
// device with a capacity.
//
// Raw allocations are slow (cudaMalloc synchronises the device) and a training step
// allocates the same sizes every step, so freed blocks are kept and reused:
// - sizes are rounded up to 512 bytes;
// - requests up to 1 MiB are carved from 2 MiB segments (the small pool), larger ones from
//   segments of their own (20 MiB for requests under 10 MiB, else rounded up to 2 MiB);
// - a request takes the best-fitting free block of its pool (smallest size, then lowest
//   address); the rest of the block is split off when it is at least 512 bytes (small pool)
//   or over 1 MiB (large pool);
// - a freed block merges with its free neighbours in the segment;
// - when the device is out of memory, the cached segments that are wholly free are given
//   back and the request retried once; if it still fails, the error states the request,
//   the device's free and total bytes, the bytes allocated to live tensors (per tag), the
//   bytes reserved in segments and the largest tensors saved for backward.
// Accounting (current/peak per tag) counts the bytes the tensors asked for, as the CPU
// allocator does, so the two devices report the same saved bytes for the same model;
// MemStats::cached is what the segments hold beyond the live blocks.
// Blocks are reused in the order they are freed and allocated on one stream: with one
// stream per device (the backend's rule) a reused block's later kernels run after its
// earlier ones.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "lb/core/allocator.h"

namespace lb {

// Where a caching allocator gets its segments.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* raw_alloc(size_t nbytes) = 0;  // nullptr when the device is out of memory
  virtual void raw_free(void* p) = 0;
  virtual void mem_info(size_t& free_bytes, size_t& total_bytes) = 0;
  virtual std::string name() const = 0;  // for messages: "cuda:0"
};

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallRequest = size_t{1} << 20;   // the small pool's largest request
  static constexpr size_t kSmallSegment = size_t{2} << 20;
  static constexpr size_t kMidRequest = size_t{10} << 20;    // under this: a 20 MiB segment
  static constexpr size_t kMidSegment = size_t{20} << 20;
  static constexpr size_t kSegmentRound = size_t{2} << 20;

  explicit CachingAllocator(DeviceMemory& memory) : memory_(memory) {}
  ~CachingAllocator() override;  // gives every segment back (live blocks included)

  void* allocate(size_t nbytes, MemTag tag) override;
  void deallocate(void* p, size_t nbytes, MemTag tag) override;
  void retag_block(void* p, size_t nbytes, MemTag from, MemTag to) override;
  MemStats stats() const override;
  void release_cached() override;  // gives back the segments that are wholly free

  // For tests and reports.
  size_t reserved_bytes() const;        // in segments
  size_t block_bytes_in_use() const;    // live blocks, rounded sizes
  size_t segment_count() const;
  size_t raw_allocs() const;            // raw_alloc calls that succeeded, ever
  // The live block holding p, as (address, rounded size); {nullptr, 0} when none.
  std::pair<void*, size_t> block_of(const void* p) const;
  // Throws unless the segments are tiled exactly by their blocks, neighbours free are
  // merged and the pools hold exactly the free blocks.
  void check_invariants() const;

  static size_t round_size(size_t nbytes);
  static size_t segment_size(size_t rounded);

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool small;        // pool
    bool free = true;
    MemTag tag = MemTag::Other;
    size_t requested = 0;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
  };
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using Pool = std::set<Block*, BySizeThenAddress>;

  Pool& pool_of(bool small) { return small ? small_pool_ : large_pool_; }
  const Pool& pool_of_const(bool small) const { return small ? small_pool_ : large_pool_; }
  Block* find_free(size_t rounded, bool small);
  Block* new_segment(size_t rounded, bool small, size_t nbytes, MemTag tag);
  void split(Block* b, size_t rounded);
  void absorb_next(Block* b);  // b grows over its (free) next neighbour
  void free_segment(Block* b);  // b spans its whole segment
  size_t release_cached_locked();
  [[noreturn]] void out_of_memory(size_t nbytes, size_t segment, MemTag tag);

  DeviceMemory& memory_;
  mutable std::mutex mu_;
  Pool small_pool_, large_pool_;
  std::unordered_map<void*, Block*> live_;
  std::map<char*, Block*> segments_;  // segment start -> its first block
  size_t reserved_ = 0;
  size_t in_use_ = 0;
  size_t raw_allocs_ = 0;
};

}  // namespace lb
