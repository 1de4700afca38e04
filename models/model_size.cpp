// ParamCount and check_parameters_fit (see model_size.h).
#include "models/model_size.h"

#include <unistd.h>

#include <cstdio>

#include "lb/core/error.h"

namespace lb::models {

namespace {
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
// "9109504.0 GiB", "23.5 GiB".
std::string gib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / static_cast<double>(uint64_t{1} << 30));
  return buf;
}
}  // namespace

ParamCount& ParamCount::add(std::initializer_list<int64_t> factors) {
  uint64_t product = 1;
  for (const int64_t f : factors) product = saturating_mul(product, f < 0 ? UINT64_MAX : static_cast<uint64_t>(f));
  total_ = saturating_add(total_, product);
  return *this;
}

ParamCount& ParamCount::add_times(const ParamCount& each, int64_t times) {
  total_ = saturating_add(total_, saturating_mul(each.total_, times < 0 ? UINT64_MAX : static_cast<uint64_t>(times)));
  return *this;
}

void check_parameters_fit(const ParamCount& params, const std::string& path, const std::string& sizes) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return;  // unknown: the allocator's own check remains
  const double physical = static_cast<double>(pages) * static_cast<double>(page_size);
  const uint64_t bytes = saturating_mul(params.total(), sizeof(float));
  if (static_cast<double>(bytes) <= physical && !params.saturated() && bytes != UINT64_MAX) return;
  if (params.saturated() || bytes == UINT64_MAX)
    LB_FAIL(path, ": ", sizes, " make more than 2^62 parameters, more than this machine's ", gib(physical),
            " of memory holds (HINT: check these sizes)");
  LB_FAIL(path, ": ", sizes, " make ", params.total(), " parameters, ", gib(static_cast<double>(bytes)),
          " in float32, more than this machine's ", gib(physical), " of memory (HINT: check these sizes)");
}

}  // namespace lb::models
