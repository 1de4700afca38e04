// Internal: argument checks shared by the ops; messages name the op, shapes and dtypes.
#pragma once
#include "lb/core/tensor.h"

namespace lb::detail {

inline void check_defined(const Tensor& t, const char* op, const char* arg) {
  LB_CHECK(t.defined(), op, ": argument '", arg, "' is undefined");
}
inline void check_cpu(const Tensor& t, const char* op) {
  LB_CHECK(t.device().is_cpu(), op, ": ", t.str(), " is on ", t.device().str(),
           "; this op has no CUDA kernel yet");
}
inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  LB_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch, ", dtype_name(a.dtype()), " ",
           shape_str(a.shape()), " vs ", dtype_name(b.dtype()), " ", shape_str(b.shape()),
           ". HINT: convert one side with .to(dtype)");
}
inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  LB_CHECK(a.device() == b.device(), op, ": device mismatch, ", a.device().str(), " vs ",
           b.device().str());
}
inline void check_floating(const Tensor& t, const char* op) {
  LB_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64, op, ": needs an f32/f64 tensor, got ",
           dtype_name(t.dtype()));
}
// t's strides broadcast to `shape` (0 on broadcast axes); t must be broadcastable.
Shape broadcast_strides(const Tensor& t, const Shape& shape);

}  // namespace lb::detail
