// OpenBLAS configuration, applied once before the first BLAS call (a static initializer in
// blas_config.cpp; cpu::gemm also calls configure_blas(), so the object is always linked).
//
// One thread pool: OpenBLAS (the Debian pthread build) runs single-threaded and our own
// OpenMP loops split the GEMMs (cpu::gemm in gemm.h). Two pools on the same cores fight:
// libgomp's workers spin after each parallel region while OpenBLAS's threads wait for a core,
// and OpenBLAS's workers spin-yield after each GEMM while the next OpenMP loop waits. On
// bert_mini (2 cores) the spinning took over 40% of the profile samples, and the step ran
// about 2x slower than with one pool.
//
// The kernel set is OpenBLAS's own choice (OPENBLAS_CORETYPE when set: this machine class
// sets it to Haswell, i.e. AVX2 kernels; unset, OpenBLAS 0.3.21 picks its AVX-512
// "Cooperlake" kernels on these CPUs, about 1.8x the GEMM throughput).
#pragma once
#include <string>

namespace lb::cpu {

void configure_blas();  // idempotent and thread-safe

struct BlasConfig {
  std::string core;      // OpenBLAS kernel set in use, e.g. "Haswell", "Cooperlake"
  int blas_threads = 1;  // OpenBLAS's own threads (1: our OpenMP loops split GEMMs)
};
const BlasConfig& blas_config();

// While alive, OpenBLAS may use all OpenMP threads (restored to 1 after): for occasional
// large BLAS/LAPACK calls that cpu::gemm cannot split (syrk, syevd). A no-op inside an
// OpenMP parallel region.
class BlasThreads {
 public:
  BlasThreads();
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  bool active_ = false;
};

}  // namespace lb::cpu
