// `leanback bench gemm [--m M --n N --k K] [--ta] [--tb] [--iters N] [--threads T] [--json]`
// (--device cuda: src/cli/bench_gemm_cuda.cpp):
// single-threaded float GEMM throughput of gemm_serial (our kernel, sgemm_avx512.h) against
// cblas_sgemm (OpenBLAS, whatever OPENBLAS_CORETYPE selects) on the same buffers, in GFLOP/s.
// Without --m/--n/--k: a table over the shapes the models issue (ResNet-18 im2col convolution
// forward NN, data gradient TN, filter gradient NT; the Winograd convolution's per-position
// products, tiles x channels; Linear layers).
// --precision bf16 times the bf16 kernel (sgemm_bf16.h: operands rounded to bf16, f32
// accumulation) against our f32 kernel instead of OpenBLAS; --precision int8 times HOT's
// integer GEMM (int8_gemm.h: int8 operands, int32 results) against our f32 kernel, in
// GOP/s (a multiply-add = 2 operations, as for the float products).
// --threads T runs T copies at once (one per OpenMP thread, own buffers) and reports the mean
// per-thread rate, to see whether concurrent products slow each other down.
#include <unistd.h>

#include <cblas.h>
#include <omp.h>

#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>

#include "src/cli/bench_workloads.h"
#include "src/cli/cli_parse.h"
#include "src/cli/commands.h"
#include "lb/core/error.h"
#include "src/cpu/blas_config.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/gemm_serial.h"
#include "src/cpu/int8_gemm.h"
#include "src/cpu/sgemm_avx512.h"
#include "src/cpu/sgemm_bf16.h"

namespace lb::cli {

namespace {

struct GemmShape {
  int64_t m, n, k;
  bool ta, tb;
  const char* what;
};

const std::vector<GemmShape>& default_shapes() {
  static const std::vector<GemmShape> s = {
      {64, 1024, 576, false, false, "conv fwd 64ch"},
      {128, 1024, 1152, false, false, "conv fwd 128ch"},
      {256, 1024, 2304, false, false, "conv fwd 256ch"},
      {512, 1024, 4608, false, false, "conv fwd 512ch"},
      {64, 256, 576, false, false, "conv fwd N=256"},
      {512, 256, 4608, false, false, "conv fwd N=256"},
      {64, 4096, 576, false, false, "conv fwd N=4096"},
      {256, 4096, 2304, false, false, "conv fwd N=4096"},
      {576, 1024, 64, true, false, "conv data grad"},
      {1152, 1024, 128, true, false, "conv data grad"},
      {4608, 1024, 512, true, false, "conv data grad"},
      {64, 576, 1024, false, true, "conv filter grad"},
      {512, 4608, 1024, false, true, "conv filter grad"},
      {64, 576, 8192, false, true, "conv filter grad"},
      {1024, 64, 64, false, true, "winograd fwd 64ch"},
      {64, 64, 1024, true, false, "winograd filter grad"},
      {1024, 64, 64, false, false, "winograd data grad"},
      {256, 256, 256, false, true, "winograd fwd 256ch"},
      {256, 256, 256, true, false, "winograd filter grad"},
      {512, 2048, 512, true, true, "winograd-sized TT"},
      {4096, 3072, 768, false, false, "linear fwd"},
      {4096, 768, 3072, false, true, "linear grad x"},
      {3072, 768, 4096, true, false, "linear grad w"},
  };
  return s;
}

struct Rates {
  double ours = 0, openblas = 0;
};

// Median GFLOP/s of `iters` timed runs, each long enough (>= ~20 ms) to time reliably.
template <typename F>
double rate(const GemmShape& s, int iters, F&& f) {
  const double flops = 2.0 * s.m * s.n * s.k;
  const int reps = std::max(1, static_cast<int>(2e9 * 0.02 / std::max(1.0, flops)));
  f();  // warm-up: packing buffers, page faults
  std::vector<double> r;
  for (int it = 0; it < iters; ++it) {
    const auto t0 = BenchClock::now();
    for (int i = 0; i < reps; ++i) f();
    r.push_back(flops * reps / (ms_since(t0, BenchClock::now()) * 1e6));
  }
  return median(r);
}

enum class Mode { F32, BF16, INT8 };

Rates measure(const GemmShape& s, int iters, int threads, Mode mode) {
  double ours = 0, blas = 0;
#pragma omp parallel num_threads(threads) reduction(+ : ours, blas)
  {
    omp_set_num_threads(1);  // the int8 kernel's own parallel region: one thread per copy
    std::mt19937 g(static_cast<uint32_t>(1 + omp_get_thread_num()));
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n));
    for (auto& x : a) x = d(g);
    for (auto& x : b) x = d(g);
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    std::vector<int8_t> a8, b8;
    std::vector<int32_t> c32;
    if (mode == Mode::INT8) {  // levels as HOT's int8 path makes them
      for (float x : a) a8.push_back(static_cast<int8_t>(x * 127.f));
      for (float x : b) b8.push_back(static_cast<int8_t>(x * 127.f));
      c32.resize(c.size());
    }
    ours += rate(s, iters, [&] {
      if (mode == Mode::INT8) {
        cpu::int8_gemm_s32(s.ta, s.tb, s.m, s.n, s.k, a8.data(), lda, b8.data(), ldb, c32.data(), s.n);
        return;
      }
      if (mode == Mode::BF16) {
        cpu::sgemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), s.n);
        return;
      }
      cpu::gemm_serial(s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), s.n);
    });
#pragma omp barrier
    blas += rate(s, iters, [&] {
      if (mode != Mode::F32) {
        cpu::gemm_serial(s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), s.n);
        return;
      }
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.f, a.data(),
                  static_cast<int>(lda), b.data(), static_cast<int>(ldb), 0.f, c.data(),
                  static_cast<int>(s.n));
    });
  }
  return {ours / threads, blas / threads};
}

}  // namespace

int cmd_bench_gemm(const std::vector<std::string>& args) {
  GemmShape one{0, 0, 0, false, false, "custom"};
  int iters = 5, threads = 1;
  bool json = false;
  std::string precision = "f32", device = "cpu";
  CLI::App app{"GEMM GFLOP/s: ours vs OpenBLAS (f32), or --precision bf16|int8 vs our f32; --device cuda: "
               "the library's CUDA GEMM path.",
               "leanback bench gemm"};
  const auto dim = CLI::Range(int64_t{1}, int64_t{1} << 20);
  app.add_option("--m", one.m, "rows of C (with --n and --k: one custom shape)")->check(dim);
  app.add_option("--n", one.n, "columns of C")->check(dim);
  app.add_option("--k", one.k, "inner dimension")->check(dim);
  app.add_flag("--ta", one.ta, "A transposed");
  app.add_flag("--tb", one.tb, "B transposed");
  app.add_option("--iters", iters, "timed repetitions")->check(CLI::Range(1, 1000))->capture_default_str();
  add_threads_option(app, threads, "copies run at once, one per CPU thread", 1, 64)->capture_default_str();
  add_precision_option(app, precision, {"f32", "bf16", "int8", "tf32"}, "f32, bf16, int8; tf32 (CUDA)");
  add_device_option(app, device);
  app.add_flag("--json", json, "one JSON line per shape");
  if (!parse_cli(app, std::vector<std::string>(args.begin() + 1, args.end()))) return 0;
  const Mode mode = precision == "bf16" ? Mode::BF16 : precision == "int8" ? Mode::INT8 : Mode::F32;
  const Device dev = parse_device_flag(device);
  if (dev.is_cuda()) {
    if (one.ta || one.tb || threads != 1)
      throw UsageError("bench gemm --device cuda: --ta, --tb and --threads are CPU-only flags");
    if ((one.m || one.n || one.k) && !(one.m && one.n && one.k)) throw UsageError("bench gemm: give all of --m, --n, --k");
    return bench_gemm_cuda(dev, precision, one.m, one.n, one.k, iters, json);
  }
  if (precision == "tf32") throw UsageError("bench gemm --precision tf32 needs --device cuda (the CPU has no TF32)");
  const bool custom = one.m || one.n || one.k;
  if (custom && !(one.m && one.n && one.k)) throw UsageError("bench gemm: give all of --m, --n, --k");
  if (!custom && (one.ta || one.tb)) throw UsageError("bench gemm: --ta/--tb need --m, --n, --k");
  if (custom) {
    // A, B and two C (ours, OpenBLAS's) in f32: refuse what the machine cannot hold.
    const double bytes = 4.0 * (static_cast<double>(one.m) * one.k + static_cast<double>(one.k) * one.n +
                                2.0 * static_cast<double>(one.m) * one.n);
    const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    if (physical > 0 && bytes > 0.8 * physical)
      throw UsageError("bench gemm: --m " + std::to_string(one.m) + " --n " + std::to_string(one.n) + " --k " +
                       std::to_string(one.k) + " needs " + std::to_string(static_cast<int64_t>(bytes / (1 << 30))) +
                       " GiB of matrices; this machine has " +
                       std::to_string(static_cast<int64_t>(physical / (1 << 30))) + " GiB");
  }
  const bool bf16 = mode == Mode::BF16;
  if (bf16 && !cpu::sgemm_bf16_available())
    throw Error("bench gemm --precision bf16: this CPU or LEANBACK_ISA has no bf16 kernel (" +
                cpu::isa_summary() + ")");
  cpu::configure_blas();  // OpenBLAS single-threaded, like every product in the library
  const std::vector<GemmShape> shapes = custom ? std::vector<GemmShape>{one} : default_shapes();

  nlohmann::json rows = nlohmann::json::array();
  const char* low_name = mode == Mode::INT8 ? cpu::int8_gemm_kernel() : cpu::sgemm_bf16_kernel_name();
  const char* low = mode == Mode::INT8 ? "int8" : "bf16";
  if (!json && mode == Mode::INT8)
    std::printf("int8 GEMM (int32 results), GOP/s per thread (%d thread%s at once): int8 = %s, "
                "f32 = %s\n    M     N     K op  int8       f32  ratio  what\n",
                threads, threads > 1 ? "s" : "", low_name, cpu::sgemm_kernel_name());
  else if (!json && bf16)
    std::printf("bf16 GEMM (f32 accumulation), GFLOP/s per thread (%d thread%s at once): bf16 = %s, "
                "f32 = %s\n    M     N     K op  bf16       f32  ratio  what\n",
                threads, threads > 1 ? "s" : "", cpu::sgemm_bf16_kernel_name(), cpu::sgemm_kernel_name());
  else if (!json)
    std::printf("float GEMM, GFLOP/s per thread (%d thread%s at once): ours = %s, OpenBLAS = %s\n"
                "    M     N     K op  ours  openblas  ratio  what\n",
                threads, threads > 1 ? "s" : "", cpu::sgemm_kernel_name(),
                cpu::blas_config().core.c_str());
  for (const GemmShape& s : shapes) {
    const Rates r = measure(s, iters, threads, mode);
    if (mode != Mode::F32)
      rows.push_back({{"m", s.m}, {"n", s.n}, {"k", s.k}, {"ta", s.ta}, {"tb", s.tb},
                      {std::string(low) + "_gflops", r.ours}, {"f32_gflops", r.openblas}, {"what", s.what}});
    else
      rows.push_back({{"m", s.m}, {"n", s.n}, {"k", s.k}, {"ta", s.ta}, {"tb", s.tb},
                      {"ours_gflops", r.ours}, {"openblas_gflops", r.openblas}, {"what", s.what}});
    if (!json)
      std::printf("%5lld %5lld %5lld %c%c %6.1f %8.1f %6.2f  %s\n", static_cast<long long>(s.m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), s.ta ? 'T' : 'N',
                  s.tb ? 'T' : 'N', r.ours, r.openblas, r.ours / r.openblas, s.what);
    std::fflush(stdout);
  }
  if (json)
    std::cout << nlohmann::json{{"workload", "gemm"},
                                {"kernel", mode == Mode::F32 ? cpu::sgemm_kernel_name() : low_name},
                                {"precision", mode == Mode::F32 ? "f32" : low},
                                {"isa", cpu::isa_name(cpu::isa_selected())},
                                {"openblas_core", cpu::blas_config().core},
                                {"threads", threads},
                                {"iters", iters},
                                {"results", rows}}
                     .dump()
              << std::endl;
  return 0;
}

}  // namespace lb::cli
