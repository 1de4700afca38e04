// The caching allocator's bookkeeping (see caching_allocator.h): segments tiled by blocks in
// a doubly linked list each, free blocks in two best-fit pools, live blocks by address.
#include "lb/core/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "lb/core/error.h"

namespace lb {

namespace {
std::string human_bytes(double n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (n >= 1024.0 && u < 4) {
    n /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}
}  // namespace

size_t CachingAllocator::round_size(size_t nbytes) {
  LB_CHECK(nbytes <= SIZE_MAX - kMinBlock, "allocation of ", nbytes, " bytes is too large");
  return std::max(kMinBlock, (nbytes + kMinBlock - 1) / kMinBlock * kMinBlock);
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMidRequest) return kMidSegment;
  LB_CHECK(rounded <= SIZE_MAX - kSegmentRound, "allocation of ", rounded, " bytes is too large");
  return (rounded + kSegmentRound - 1) / kSegmentRound * kSegmentRound;
}

CachingAllocator::~CachingAllocator() {
  for (auto& [start, first] : segments_) {
    memory_.raw_free(start);
    for (Block* b = first; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

CachingAllocator::Block* CachingAllocator::find_free(size_t rounded, bool small) {
  Pool& pool = pool_of(small);
  Block key{nullptr, rounded, small};
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t rounded, bool small, size_t nbytes,
                                                        MemTag tag) {
  const size_t size = segment_size(rounded);
  void* p = memory_.raw_alloc(size);
  if (p == nullptr && release_cached_locked() > 0) p = memory_.raw_alloc(size);
  if (p == nullptr) out_of_memory(nbytes, size, tag);
  ++raw_allocs_;
  reserved_ += size;
  auto* b = new Block{static_cast<char*>(p), size, small};
  segments_.emplace(b->ptr, b);
  return b;
}

void CachingAllocator::split(Block* b, size_t rounded) {
  const size_t rest = b->size - rounded;
  if (b->small ? rest < kMinBlock : rest <= kSmallRequest) return;
  auto* tail = new Block{b->ptr + rounded, rest, b->small};
  tail->prev = b;
  tail->next = b->next;
  if (b->next) b->next->prev = tail;
  b->next = tail;
  b->size = rounded;
  pool_of(tail->small).insert(tail);
}

void* CachingAllocator::allocate(size_t nbytes, MemTag tag) {
  if (nbytes == 0) return nullptr;
  const size_t rounded = round_size(nbytes);
  const bool small = rounded <= kSmallRequest;
  std::lock_guard<std::mutex> lock(mu_);
  Block* b = find_free(rounded, small);
  if (b == nullptr) b = new_segment(rounded, small, nbytes, tag);
  split(b, rounded);
  b->free = false;
  b->tag = tag;
  b->requested = nbytes;
  live_.emplace(b->ptr, b);
  in_use_ += b->size;
  count_alloc(nbytes, tag);
  return b->ptr;
}

void CachingAllocator::deallocate(void* p, size_t nbytes, MemTag tag) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  LB_CHECK(it != live_.end(), memory_.name(), ": freeing a pointer this allocator does not own");
  Block* b = it->second;
  LB_CHECK(b->requested == nbytes, memory_.name(), ": freeing ", nbytes, " bytes of a block of ",
           b->requested);
  live_.erase(it);
  count_free(nbytes, tag);
  in_use_ -= b->size;
  b->free = true;
  Pool& pool = pool_of(b->small);
  // Merge with the free neighbours (out of the pool while their size changes).
  if (b->next && b->next->free) {
    pool.erase(b->next);
    absorb_next(b);
  }
  if (b->prev && b->prev->free) {
    pool.erase(b->prev);
    b = b->prev;
    absorb_next(b);
  }
  pool.insert(b);
}

void CachingAllocator::absorb_next(Block* b) {
  Block* n = b->next;
  b->size += n->size;
  b->next = n->next;
  if (n->next) n->next->prev = b;
  delete n;
}

void CachingAllocator::retag_block(void* p, size_t nbytes, MemTag from, MemTag to) {
  retag(nbytes, from, to);
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it != live_.end()) it->second->tag = to;
}

void CachingAllocator::free_segment(Block* b) {
  pool_of(b->small).erase(b);
  segments_.erase(b->ptr);
  reserved_ -= b->size;
  memory_.raw_free(b->ptr);
  delete b;
}

size_t CachingAllocator::release_cached_locked() {
  size_t released = 0;
  std::vector<Block*> whole;
  for (auto& [start, first] : segments_)
    if (first->free && first->next == nullptr) whole.push_back(first);
  for (Block* b : whole) {
    released += b->size;
    free_segment(b);
  }
  return released;
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

MemStats CachingAllocator::stats() const {
  MemStats s = Allocator::stats();
  std::lock_guard<std::mutex> lock(mu_);
  s.cached = static_cast<int64_t>(reserved_ - in_use_);
  return s;
}

size_t CachingAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}
size_t CachingAllocator::block_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}
size_t CachingAllocator::segment_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_.size();
}
size_t CachingAllocator::raw_allocs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return raw_allocs_;
}

std::pair<void*, size_t> CachingAllocator::block_of(const void* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(const_cast<void*>(p));
  if (it == live_.end()) return {nullptr, 0};
  return {it->second->ptr, it->second->size};
}

void CachingAllocator::check_invariants() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t reserved = 0, in_use = 0, free_small = 0, free_large = 0, live = 0;
  for (const auto& [start, first] : segments_) {
    LB_CHECK(first->ptr == start && first->prev == nullptr, "segment does not start with its first block");
    const bool small = first->small;
    char* end = start;
    for (const Block* b = first; b != nullptr; b = b->next) {
      LB_CHECK(b->ptr == end, "blocks do not tile their segment");
      LB_CHECK(b->small == small, "a segment mixes pools");
      LB_CHECK(b->size >= kMinBlock && b->size % kMinBlock == 0, "block size ", b->size, " not a multiple of 512");
      if (b->next) LB_CHECK(b->next->prev == b, "broken neighbour links");
      if (b->free) {
        LB_CHECK(!(b->next && b->next->free), "two free neighbours were not merged");
        LB_CHECK(pool_of_const(small).count(const_cast<Block*>(b)) == 1, "a free block is not in its pool");
        (small ? free_small : free_large) += 1;
      } else {
        LB_CHECK(live_.count(b->ptr) == 1, "a used block is not live");
        in_use += b->size;
        ++live;
      }
      end += b->size;
      reserved += b->size;
    }
  }
  LB_CHECK(reserved == reserved_, "reserved bytes ", reserved_, " but the segments hold ", reserved);
  LB_CHECK(in_use == in_use_, "bytes in use ", in_use_, " but the blocks hold ", in_use);
  LB_CHECK(live == live_.size(), "live map out of step with the blocks");
  LB_CHECK(free_small == small_pool_.size() && free_large == large_pool_.size(), "a pool holds a block that is not free");
}

void CachingAllocator::out_of_memory(size_t nbytes, size_t segment, MemTag tag) {
  size_t free_b = 0, total_b = 0;
  memory_.mem_info(free_b, total_b);
  const MemStats s = Allocator::stats();
  std::ostringstream os;
  os << memory_.name() << " out of memory: requested " << human_bytes(static_cast<double>(nbytes)) << " ("
     << mem_tag_name(tag) << "; a segment of " << human_bytes(static_cast<double>(segment)) << "); the device has "
     << human_bytes(static_cast<double>(free_b)) << " free of " << human_bytes(static_cast<double>(total_b))
     << "; live tensors hold " << human_bytes(static_cast<double>(s.total_current)) << " (";
  bool first = true;
  for (int i = 0; i < kNumMemTags; ++i) {
    if (s.current[i] == 0) continue;
    os << (first ? "" : ", ") << mem_tag_name(static_cast<MemTag>(i)) << " "
       << human_bytes(static_cast<double>(s.current[i]));
    first = false;
  }
  os << (first ? "none)" : ")") << ", this allocator reserves " << human_bytes(static_cast<double>(reserved_))
     << " (" << human_bytes(static_cast<double>(reserved_ - in_use_)) << " cached and still fragmented)";
  std::vector<const Block*> saved;
  for (const auto& [p, b] : live_)
    if (b->tag == MemTag::Saved) saved.push_back(b);
  std::sort(saved.begin(), saved.end(), [](const Block* a, const Block* b) {
    return a->requested != b->requested ? a->requested > b->requested : a->ptr < b->ptr;
  });
  if (saved.empty()) {
    os << "; no tensors are saved for backward";
  } else {
    size_t total = 0;
    for (const Block* b : saved) total += b->requested;
    os << "; " << saved.size() << " tensors saved for backward hold " << human_bytes(static_cast<double>(total))
       << ", the largest:";
    for (size_t i = 0; i < std::min<size_t>(saved.size(), 5); ++i)
      os << (i ? "," : "") << " " << human_bytes(static_cast<double>(saved[i]->requested));
  }
  os << " (a smaller batch, or --strategy instant|hot, keeps less for backward)";
  LB_FAIL(os.str());
}

}  // namespace lb
