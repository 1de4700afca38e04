// process_memory (see process_memory.h).
#include "lb/core/process_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace lb {

ProcessMemory process_memory() {
  ProcessMemory m;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long long size = 0, resident = 0;
    if (std::fscanf(f, "%lld %lld", &size, &resident) == 2) m.rss_bytes = resident * ::sysconf(_SC_PAGESIZE);
    std::fclose(f);
  }
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) == 0) m.max_rss_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024;  // KiB on Linux
  return m;
}

}  // namespace lb
