// `leanback bench gemm --device cuda[:N] [--precision f32|bf16|tf32] [--m M --n N --k K] [--iters N]
// [--json]`: throughput of the library's CUDA GEMM path (src/backend/gemm.h: the operand
// description and the cuBLAS call the ops make) in TFLOP/s, over large squares and the
// shapes of a BERT-base training step (B·T = 4096 tokens). bf16: bf16 operands, f32 results
// (what bf16 products feed the f32 outputs of); f32: f32 in CUBLAS_COMPUTE_32F (no TF32);
// tf32: f32 operands on CUBLAS_COMPUTE_32F_FAST_TF32.
// Compare with tools/bench/gemm_cuda.py (torch.matmul on the same shapes: cuBLAS's own peak).
#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "lb/core/cuda_runtime_info.h"
#include "lb/core/precision.h"
#include "lb/core/random.h"
#include "src/backend/gemm.h"
#include "src/cli/commands.h"

namespace lb::cli {

namespace {

struct Shape3 {
  int64_t m, n, k;
  const char* what;
};

const std::vector<Shape3> kShapes = {
    {1024, 1024, 1024, "square"},        {2048, 2048, 2048, "square"},
    {4096, 4096, 4096, "square"},        {8192, 8192, 8192, "square"},
    {4096, 2304, 768, "bert-base qkv"},  {4096, 768, 768, "bert-base attn out"},
    {4096, 3072, 768, "bert-base ffn1"}, {4096, 768, 3072, "bert-base ffn2"},
};

// Median-free simple timing: warm-up, then enough repetitions for >= 50 ms, TFLOP/s.
double tflops(const Shape3& s, DType dt, Device dev, int iters) {
  const Tensor a = Tensor::empty({s.m, s.k}, DType::F32, dev);
  const Tensor b = Tensor::empty({s.k, s.n}, DType::F32, dev);
  Tensor c = Tensor::empty({s.m, s.n}, DType::F32, dev);
  const Tensor ai = a.to(dt), bi = b.to(dt);  // uninitialised values: timing only
  const backend::GemmKernels& g = backend::gemm_kernels(dev);
  for (int w = 0; w < 3; ++w) g.gemm_into(c, ai, false, bi, false, {}, false);
  cuda_synchronize(dev.index);
  const double flops = 2.0 * s.m * s.n * s.k;
  double best = 0;
  for (int it = 0; it < iters; ++it) {
    int reps = 1;
    double secs = 0;
    for (;;) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) g.gemm_into(c, ai, false, bi, false, {}, false);
      cuda_synchronize(dev.index);
      secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (secs >= 0.05 || reps >= (1 << 16)) break;
      reps *= 4;
    }
    best = std::max(best, flops * reps / secs / 1e12);
  }
  return best;
}

}  // namespace

int bench_gemm_cuda(Device dev, const std::string& precision, int64_t m, int64_t n, int64_t k, int iters, bool json) {
  if (!dev.is_cuda() || dev.index >= cuda_device_count())
    throw UsageError("bench gemm --device " + dev.str() + ": " +
                     (cuda_compiled() ? std::to_string(cuda_device_count()) + " CUDA device(s) on this machine"
                                      : std::string("this leanback was built without CUDA")));
  if (precision != "f32" && precision != "bf16" && precision != "tf32")
    throw UsageError("bench gemm --device cuda: --precision must be f32, bf16 or tf32, got '" + precision + "'");
  const DType dt = precision == "bf16" ? DType::BF16 : DType::F32;
  // tf32: f32 operands on the TF32 path (lb/core/precision.h)
  const MatmulPrecisionScope scope(precision == "tf32" ? MatmulPrecision::TF32 : MatmulPrecision::F32);
  const std::vector<Shape3> shapes = m > 0 ? std::vector<Shape3>{{m, n, k, "custom"}} : kShapes;
  const std::string name = cuda_device_names()[static_cast<size_t>(dev.index)];
  nlohmann::json rows = nlohmann::json::array();
  if (!json) std::printf("%s GEMM on %s (%s), TFLOP/s\n    M     N     K  TFLOP/s  what\n", precision.c_str(),
                         dev.str().c_str(), name.c_str());
  for (const Shape3& s : shapes) {
    const double t = tflops(s, dt, dev, iters);
    rows.push_back({{"m", s.m}, {"n", s.n}, {"k", s.k}, {"tflops", t}, {"what", s.what}});
    if (!json) std::printf("%5lld %5lld %5lld %8.1f  %s\n", static_cast<long long>(s.m), static_cast<long long>(s.n),
                           static_cast<long long>(s.k), t, s.what);
  }
  if (json)
    std::cout << nlohmann::json{{"workload", "gemm"}, {"device", dev.str()}, {"gpu", name},
                                {"precision", precision}, {"results", rows}}
                     .dump()
              << std::endl;
  return 0;
}

}  // namespace lb::cli
