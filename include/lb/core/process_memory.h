// The process's memory as the operating system counts it, beside the allocator's tags: what
// the libraries mapped, the allocator's caches, OpenBLAS / OpenMP buffers and the model files
// all show here and in no tensor counter.
#pragma once
#include <cstdint>

namespace lb {

struct ProcessMemory {
  int64_t rss_bytes = 0;      // resident now (/proc/self/statm; 0 where unavailable)
  int64_t max_rss_bytes = 0;  // the most resident so far (getrusage's ru_maxrss)
};

ProcessMemory process_memory();

}  // namespace lb
