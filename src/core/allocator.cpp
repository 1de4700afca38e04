// Per-tag byte accounting shared by all allocators (the CPU one: src/core/cpu_allocator.cpp).
#include "lb/core/allocator.h"

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
  const int64_t total = total_current_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  raise_peak(total_peak_, total);
  raise_peak(step_peak_, total);
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
  s.step_peak = step_peak_.load();
  s.activation_current = activation_current_.load();
  s.activation_peak = activation_peak_.load();
  for (int i = 0; i < kNumMemTags; ++i) s.at_activation_peak[i] = at_activation_peak_[i].load();
  return s;
}

void Allocator::reset_activation_peak() {
  activation_peak_.store(activation_current_.load());
  step_peak_.store(total_current_.load());
  for (int i = 0; i < kNumMemTags; ++i) at_activation_peak_[i].store(current_[i].load());
}

void Allocator::reset_peak() {
  for (int i = 0; i < kNumMemTags; ++i) peak_[i].store(current_[i].load());
  total_peak_.store(total_current_.load());
  reset_activation_peak();
}

}  // namespace lb
