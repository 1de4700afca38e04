// Internal: walking N-d strided layouts. for_each_row calls fn(offsets...) once per
// position of all but the last axis, with each operand's element offset at that row; the
// caller loops over the last axis using the operand's last stride. Shapes of size 0 call
// nothing; 0-d tensors are one row of length 1.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::detail {

template <size_t K, typename Fn>
void for_each_row(const Shape& shape, const std::array<const Shape*, K>& strides,
                  const std::array<int64_t, K>& base, Fn&& fn) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  for (int64_t s : shape)
    if (s == 0) return;
  if (nd <= 1) {
    fn(base);
    return;
  }
  std::vector<int64_t> idx(nd - 1, 0);
  std::array<int64_t, K> off = base;
  while (true) {
    fn(off);
    int64_t d = nd - 2;
    for (; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < K; ++k) off[k] += (*strides[k])[d];
      if (idx[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

inline int64_t last_dim(const Shape& s) { return s.empty() ? 1 : s.back(); }
inline int64_t last_stride(const Shape& st) { return st.empty() ? 1 : st.back(); }

}  // namespace lb::detail
