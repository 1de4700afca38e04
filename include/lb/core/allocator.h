// Allocators with accounting. Every allocation carries a tag (what the bytes are for);
// current and peak bytes are counted per tag and in total, so benchmarks and reports can
// say where memory goes. CPU blocks are 64-byte aligned (AVX-512 loads).
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace lb {

// Buffer: non-trainable module state (BatchNorm running stats). Other: activations and temporaries.
enum class MemTag : uint8_t { Parameter, Buffer, Gradient, Optimizer, Saved, Workspace, Other };
constexpr int kNumMemTags = 7;
const char* mem_tag_name(MemTag t);

struct MemStats {
  std::array<int64_t, kNumMemTags> current{};
  std::array<int64_t, kNumMemTags> peak{};
  int64_t total_current = 0;
  int64_t total_peak = 0;
  int64_t cached = 0;  // bytes of freed blocks a caching allocator keeps for reuse (not in current)
  // Activation memory: every byte but the model's and optimizer's state (parameters,
  // buffers, gradients, optimizer state), i.e. kept tensors, workspace and temporaries, as
  // one counter; its peak, and each tag's bytes at the moment that peak was reached.
  int64_t activation_current = 0;
  int64_t activation_peak = 0;
  std::array<int64_t, kNumMemTags> at_activation_peak{};
  // Every byte's peak since reset_activation_peak() (one training step's whole-step peak,
  // which memory.budget bounds), beside total_peak (since reset_peak(): a log window's).
  int64_t step_peak = 0;
};
// Whether bytes of this tag count as activation memory (MemStats::activation_current).
constexpr bool is_activation_tag(MemTag t) {
  return t == MemTag::Saved || t == MemTag::Workspace || t == MemTag::Other;
}

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, MemTag tag) = 0;
  virtual void deallocate(void* p, size_t nbytes, MemTag tag) = 0;
  virtual MemStats stats() const;
  void reset_peak();  // peaks := current
  void reset_activation_peak();  // the activation and step peaks only (one training step's)
  // How many times the activation peak has risen (a watcher compares two readings to learn
  // whether the peak rose in between: autograd/peak_watch.h).
  int64_t activation_peak_rises() const { return activation_peak_rises_.load(std::memory_order_relaxed); }
  // Returns the blocks a caching allocator keeps to the system (no-op otherwise).
  virtual void release_cached() {}
  // Moves accounted bytes from one tag to another (e.g. an activation becomes "saved").
  void retag(size_t nbytes, MemTag from, MemTag to);
  // The same for the block at p (an allocator that tracks its blocks' tags updates it).
  virtual void retag_block(void* p, size_t nbytes, MemTag from, MemTag to) { (void)p; retag(nbytes, from, to); }

 protected:
  void count_alloc(size_t nbytes, MemTag tag);
  void count_free(size_t nbytes, MemTag tag);

 private:
  std::array<std::atomic<int64_t>, kNumMemTags> current_{};
  std::array<std::atomic<int64_t>, kNumMemTags> peak_{};
  std::atomic<int64_t> total_current_{0};
  std::atomic<int64_t> total_peak_{0};
  std::atomic<int64_t> step_peak_{0};
  std::atomic<int64_t> activation_current_{0};
  std::atomic<int64_t> activation_peak_{0};
  std::array<std::atomic<int64_t>, kNumMemTags> at_activation_peak_{};
  std::atomic<int64_t> activation_peak_rises_{0};
  void add_activation(int64_t n);
};

// The CPU allocator maps blocks of 64 KiB and more itself (so what it frees leaves the
// process) and caches freed ones for reuse, split and grown to fit (page ranges):
// training steps allocate the same sizes every step, and fresh large blocks cost a mmap, page
// faults on first touch and a munmap each. Live and cached blocks together stay within the
// live blocks' highest total plus 1/32; the cache alone within LEANBACK_CPU_CACHE_MB MiB
// (environment, default 4096; 0 disables it); release_cached() empties it. Accounting
// (current/peak) counts live tensors only; MemStats::cached the rest.
Allocator& cpu_allocator();

}  // namespace lb
