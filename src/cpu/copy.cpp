// CPU copy and fill kernels (src/backend/copy.h): rows of the strided layouts, memcpy where
// both are dense in the last axis, 4-byte moves and f64 -> f32 inline, any other pair of
// dtypes through double.
#include "src/backend/copy.h"

#include <cstring>

#include "lb/core/strided.h"
#include "src/core/element_convert.h"

namespace lb::backend {
namespace {

using detail::load_as_double;
using detail::store_from_double;

void copy(Tensor& dst, const Tensor& s) {
  const DType dt = dst.dtype(), st = s.dtype();
  const size_t es = dtype_size(dt);
  char* dbase = static_cast<char*>(dst.storage()->data());
  const char* sbase = static_cast<const char*>(s.storage()->data());
  const int64_t n = detail::last_dim(dst.shape());
  const int64_t ds = detail::last_stride(dst.strides()), ss = detail::last_stride(s.strides());
  detail::for_each_row<2>(dst.shape(), {&dst.strides(), &s.strides()}, {dst.offset(), s.offset()},
                          [&](const std::array<int64_t, 2>& o) {
    if (dt == st && ds == 1 && ss == 1) {
      std::memcpy(dbase + o[0] * es, sbase + o[1] * es, n * es);
    } else if (dt == st && es == 4) {
      auto* d = reinterpret_cast<uint32_t*>(dbase) + o[0];
      auto* q = reinterpret_cast<const uint32_t*>(sbase) + o[1];
      for (int64_t i = 0; i < n; ++i) d[i * ds] = q[i * ss];
    } else if (dt == DType::F32 && st == DType::F64) {
      auto* d = reinterpret_cast<float*>(dbase) + o[0];
      auto* q = reinterpret_cast<const double*>(sbase) + o[1];
      for (int64_t i = 0; i < n; ++i) d[i * ds] = static_cast<float>(q[i * ss]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        store_from_double(dbase, o[0] + i * ds, dt, load_as_double(sbase, o[1] + i * ss, st));
    }
  });
}

void fill(Tensor& dst, double value) {
  const DType t = dst.dtype();
  char* base = static_cast<char*>(dst.storage()->data());
  const int64_t n = detail::last_dim(dst.shape()), s = detail::last_stride(dst.strides());
  detail::for_each_row<1>(dst.shape(), {&dst.strides()}, {dst.offset()}, [&](const std::array<int64_t, 1>& o) {
    if (t == DType::F32) {
      float* p = reinterpret_cast<float*>(base) + o[0];
      for (int64_t i = 0; i < n; ++i) p[i * s] = static_cast<float>(value);
    } else {
      for (int64_t i = 0; i < n; ++i) store_from_double(base, o[0] + i * s, t, value);
    }
  });
}

}  // namespace

const CopyKernels kCpuCopy{copy, fill};

}  // namespace lb::backend
