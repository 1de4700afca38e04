// OpenBLAS configuration (see blas_config.h for why).
#include "src/cpu/blas_config.h"

#include <omp.h>

#include <mutex>

extern "C" {
char* openblas_get_corename(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int);
}

namespace lb::cpu {

namespace {

BlasConfig g_config;
std::once_flag g_once;

void configure_once() {
  openblas_set_num_threads(1);
  g_config.core = openblas_get_corename();
  g_config.blas_threads = openblas_get_num_threads();
}

// Before main(): anything that calls BLAS, ours or not, sees the final configuration.
[[maybe_unused]] const bool g_configured_at_startup = (configure_blas(), true);

}  // namespace

void configure_blas() { std::call_once(g_once, configure_once); }

const BlasConfig& blas_config() {
  configure_blas();
  return g_config;
}

BlasThreads::BlasThreads() {
  configure_blas();
  if (omp_in_parallel() || omp_get_max_threads() <= 1) return;
  openblas_set_num_threads(omp_get_max_threads());
  active_ = true;
}

BlasThreads::~BlasThreads() {
  if (active_) openblas_set_num_threads(1);
}

}  // namespace lb::cpu
