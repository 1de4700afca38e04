// CPU bias kernels of Linear (src/backend/bias.h).
#include <algorithm>
#include <cstring>

#include "lb/core/dispatch.h"
#include "src/backend/bias.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelMin = 1 << 15;

void fill_rows(Tensor& y, const Tensor& b) {
  const int64_t cols = b.numel(), rows = cols == 0 ? 0 : y.numel() / cols;
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(y.dtype());
  const char* src = static_cast<const char*>(b.raw_data());
  char* dst = static_cast<char*>(y.raw_data());
#pragma omp parallel for if (y.numel() > kParallelMin) schedule(static)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * row_bytes, src, row_bytes);
}

// Threads own column blocks and stream all rows, so each output is written by one thread.
void column_sums(const Tensor& g, Tensor& out) {
  const int64_t cols = out.numel(), rows = cols == 0 ? 0 : g.numel() / cols;
  detail::dispatch_float(g.dtype(), "linear backward", [&](auto tag_) {
    using T = decltype(tag_);
    const T* p = g.data<T>();
    T* o = out.data<T>();
    constexpr int64_t kBlock = 256;
#pragma omp parallel for if (g.numel() > kParallelMin) schedule(static)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = std::min(cols, c0 + kBlock);
      std::fill(o + c0, o + c1, T(0));
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = p + r * cols;
        for (int64_t c = c0; c < c1; ++c) o[c] += row[c];
      }
    }
  });
}

}  // namespace

const BiasKernels kCpuBias{fill_rows, column_sums};

}  // namespace lb::backend
