// The precision of float matrix products (matmul, linear, the convolutions' GEMMs): F32 by
// default; BF16 rounds both operands to bf16 and accumulates in f32, the CPU counterpart of
// torch.autocast(dtype=bfloat16) for these ops (outputs, master weights, optimizer state,
// LayerNorm, softmax and the loss stay f32). Process-wide, so the OpenMP threads a product
// is split over see it too; f64 products (gradient checks) are never affected.
//
// On a CPU with AVX512-BF16 the products run on vdpbf16ps (src/cpu/sgemm_bf16.h); elsewhere
// the operands are rounded into scratch copies and multiplied by the f32 kernel (same
// numbers up to f32 summation order, no speed-up).
#pragma once
#include <cstdint>
#include <string>

namespace lb {

// TF32 (opt-in, CUDA only): f32 operands on the tensor cores' TF32 path
// (CUBLAS_COMPUTE_32F_FAST_TF32, 10-bit mantissas, f32 accumulation), as PyTorch's
// allow_tf32; the CPU has no TF32 and runs such products in f32.
enum class MatmulPrecision : uint8_t { F32, BF16, TF32 };

MatmulPrecision matmul_precision();
void set_matmul_precision(MatmulPrecision p);
const char* matmul_precision_name(MatmulPrecision p);      // "f32", "bf16", "tf32"
MatmulPrecision matmul_precision_from_name(const std::string& name);  // throws on unknown

// Sets the precision for a scope and restores the previous one.
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p) : old_(matmul_precision()) { set_matmul_precision(p); }
  ~MatmulPrecisionScope() { set_matmul_precision(old_); }
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision old_;
};

}  // namespace lb
