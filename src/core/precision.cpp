// The process-wide matmul precision (contract in lb/core/precision.h).
#include "lb/core/precision.h"

#include <atomic>

#include "lb/core/error.h"

namespace lb {

namespace {
std::atomic<MatmulPrecision> g_precision{MatmulPrecision::F32};
}

MatmulPrecision matmul_precision() { return g_precision.load(std::memory_order_relaxed); }
void set_matmul_precision(MatmulPrecision p) { g_precision.store(p, std::memory_order_relaxed); }

const char* matmul_precision_name(MatmulPrecision p) {
  return p == MatmulPrecision::BF16 ? "bf16" : p == MatmulPrecision::TF32 ? "tf32" : "f32";
}

MatmulPrecision matmul_precision_from_name(const std::string& name) {
  if (name == "f32") return MatmulPrecision::F32;
  if (name == "bf16") return MatmulPrecision::BF16;
  if (name == "tf32") return MatmulPrecision::TF32;
  LB_FAIL("unknown precision '", name, "'; valid: f32, bf16, tf32");
}

}  // namespace lb
