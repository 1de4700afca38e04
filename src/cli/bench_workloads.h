// `leanback bench`: the workload registry and the timing helpers every workload shares.
// A workload is one function that runs warm-up and timed iterations and returns its result
// as JSON (one line on stdout with --json). To add one: write src/cli/bench_<name>.cpp
// defining `nlohmann::json bench_<name>(const BenchOptions&)`, declare it here, and list it
// in bench_workloads() (bench.cpp).
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/device.h"

namespace lb::cli {

struct BenchOptions {
  int iters = 10;                    // timed iterations
  int warmup = 3;                    // untimed iterations first (allocator, BLAS buffers)
  bool json = false;                 // one JSON line instead of a readable summary
  std::string strategy = "vanilla";  // Linear/Conv backward strategy (bench_strategy.h)
  int rank = 0;                      // --rank N: fixed low-rank size (INSTANT R_x = R_y = N)
  int gx_bits = 0;                   // --gx-bits 4|8: HOT's g_x levels (0: the strategy's default)
  std::string precision = "f32";     // --precision bf16: every float product on bf16 operands
  Device device = Device::cpu();     // --device cuda[:N]: model, batch and optimizer state there
  std::string codec;                 // --codec NAME: every kept activation in that codec (memory.codecs)
  bool recompute = false;            // --recompute: every block recomputed in backward (memory.recompute)
};

struct BenchWorkload {
  std::string name;
  std::string description;
  std::function<nlohmann::json(const BenchOptions&)> run;
};

// All workloads, in the order `bench --help` lists them.
const std::vector<BenchWorkload>& bench_workloads();

nlohmann::json bench_linear_bwd(const BenchOptions& opt);
nlohmann::json bench_conv_bwd(const BenchOptions& opt);
nlohmann::json bench_bert_mini(const BenchOptions& opt);  // bench_bert_mini.cpp
nlohmann::json bench_bert_base(const BenchOptions& opt);  // bench_bert_mini.cpp
nlohmann::json bench_vit_tiny(const BenchOptions& opt);   // bench_vit_tiny.cpp
nlohmann::json bench_resnet18(const BenchOptions& opt);   // bench_resnet18.cpp

// `bench gemm`: float GEMM kernel throughput, ours vs OpenBLAS (own flags; bench_gemm.cpp).
int cmd_bench_gemm(const std::vector<std::string>& args);
// bench gemm --device cuda (src/cli/bench_gemm_cuda.cpp): m = 0 runs the default shapes.
int bench_gemm_cuda(Device dev, const std::string& precision, int64_t m, int64_t n, int64_t k, int iters,
                    bool json);

// `bench codec`: kept-tensor codec encode/decode GB/s against a copy (own flags; bench_codec.cpp).
int cmd_bench_codec(const std::vector<std::string>& args);

// `bench CONFIG.json`: a config's training step, planned for --memory-budget where given
// (own flags; bench_config.cpp). args[0] is the config.
int cmd_bench_config(const std::vector<std::string>& args);

// ---- timing helpers ----
using BenchClock = std::chrono::steady_clock;

inline double ms_since(BenchClock::time_point t0, BenchClock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Threads the run used: OpenMP (our loops) and OpenBLAS (GEMMs).
nlohmann::json bench_threads();

// The fields every workload's JSON line opens with: workload, strategy, framework, device,
// dtype, iters, warmup, threads (what the PyTorch twins print too).
nlohmann::json bench_json_head(const std::string& workload, const BenchOptions& opt);

}  // namespace lb::cli
