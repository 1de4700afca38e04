// environment_json / git_commit / cpu_model (see run_info.h).
#include "lb/train/run/run_info.h"

#include <omp.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <thread>

#include "src/backend/kernel_info.h"

#ifndef LEANBACK_SOURCE_DIR
#define LEANBACK_SOURCE_DIR "."
#endif

namespace lb::train {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(' ', c + 1));
    }
  return "unknown";
}

std::string git_commit() {
  const std::string cmd = std::string("git -C '") + LEANBACK_SOURCE_DIR + "' rev-parse HEAD 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "unknown";
  std::array<char, 128> buf{};
  std::string out;
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
  const int rc = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return rc == 0 && out.size() >= 7 ? out : "unknown";
}

nlohmann::json environment_json() {
  const backend::CpuKernelInfo k = backend::cpu_kernel_info();
  return {{"leanback_version", LEANBACK_VERSION},
          {"build_type", LEANBACK_BUILD_TYPE},
          {"cpu", cpu_model()},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"omp_threads", omp_get_max_threads()},
          {"build_arch", LEANBACK_ARCH},
          {"isa", k.isa},
          {"sgemm", k.sgemm},
          {"int8_gemm", k.int8_gemm}};
}

std::string bf16_products_note() { return backend::bf16_products_note(); }

std::string hot_kernel_warning() {
  const std::string kernel = backend::cpu_kernel_info().int8_gemm;
  if (kernel != "portable") return "";
  return "HOT's integer GEMM runs the portable loop on this CPU (int8 GEMM kernel: portable; the vector kernels "
         "need AVX2, `leanback info` lists them), many times slower than the f32 GEMM: vanilla or INSTANT "
         "backward is faster here";
}

}  // namespace lb::train
