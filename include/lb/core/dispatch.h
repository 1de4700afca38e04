// Internal: run a generic lambda for the floating compute dtypes (f32, f64):
//   dispatch_float(t.dtype(), "op", [&](auto tag) { using T = decltype(tag); ... });
#pragma once
#include "lb/core/dtype.h"
#include "lb/core/error.h"

namespace lb::detail {

template <typename F>
void dispatch_float(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::F32: f(float{}); break;
    case DType::F64: f(double{}); break;
    default: LB_FAIL(what, ": dtype ", dtype_name(dtype), " not supported (f32, f64 only)");
  }
}

}  // namespace lb::detail
