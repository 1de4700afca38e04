// `leanback info`: version, build type, BLAS, threads, CUDA.
#include <omp.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "lb/core/cuda_runtime_info.h"
#include "lb/core/process_memory.h"
#include "src/cli/commands.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/int8_gemm.h"
#include "src/cpu/quantize.h"
#include "src/cpu/sgemm_avx512.h"
#include "src/cpu/sgemm_bf16.h"

extern "C" char* openblas_get_config();
extern "C" int openblas_get_num_threads();

namespace lb::cli {

namespace {
// The bf16 kernel and whether precision "bf16" uses it (its measured speed against f32).
std::string bf16_line() {
  if (!cpu::sgemm_bf16_available()) return "none (precision bf16 rounds operands for the f32 kernel)";
  std::ostringstream os;
  os << cpu::sgemm_bf16_kernel_name() << ", vdpbf16ps at " << std::fixed << std::setprecision(2)
     << cpu::bf16_dot_speedup() << "x the f32 FMA rate: precision bf16 "
     << (cpu::sgemm_bf16_preferred() ? "uses it" : "uses the f32 kernel on rounded operands");
  return os.str();
}
}  // namespace

std::string usage() {
  return "usage: leanback <command> [options]   (leanback <command> --help for its options)\n"
         "  train CONFIG [--strategy vanilla|instant|hot] [--set key=value]... [--out DIR]\n"
         "        [--resume DIR] [--seed N] [--overwrite] [--nproc N]\n"
         "                               train from a JSON config (configs/README.md);\n"
         "                               --nproc N: data-parallel over N MPI processes\n"
         "  eval CONFIG --checkpoint DIR [--split S] [--predictions FILE.jsonl]\n"
         "                               metrics of a checkpoint on a labeled split\n"
         "  predict CONFIG --checkpoint DIR --out DIR\n"
         "                               test-split predictions as GLUE submission files\n"
         "  export RUN_DIR|CHECKPOINT --out DIR [--merge]\n"
         "                               a Hugging Face model directory (PEFT adapter with\n"
         "                               LoRA unless --merge; torchvision weights for ResNet)\n"
         "  plan CONFIG [--strategy S]   which backward strategy each layer gets, and why\n"
         "  compare CONFIG [--strategies vanilla,instant,hot] [--seeds N] [--set key=value]...\n"
         "        [--out DIR]            the strategies side by side: table, report.json/.md, plots\n"
         "  plot RUN_DIR|COMPARE_DIR     redraw a run's or a comparison's plots (matplotlib)\n"
         "  tokenize --vocab DIR|FILE [--pair] [--max-len N]\n"
         "                               stdin lines -> input_ids/token_type_ids JSON lines\n"
         "  info                         version, build, BLAS, threads, CUDA devices\n"
         "  bench WORKLOAD [--strategy vanilla|instant|hot] [--rank N] [--iters N] [--json]\n"
         "                               benchmarks printing one line (JSON with --json);\n"
         "                               `leanback bench` lists the workloads\n"
         "  bench gemm [--m M --n N --k K [--ta] [--tb]] [--iters N] [--threads T] [--json]\n"
         "                               float GEMM GFLOP/s, ours vs OpenBLAS\n"
         "  bench tokenize [--vocab DIR|FILE] [--data TSV] [--iters N] [--json]\n"
         "                               WordPiece tokens/s on SST-2 train, one thread\n"
         "  --verbose (any command) or LEANBACK_DEBUG=1: errors also name the check and source line\n"
         "  --version                    the version, commit and build\n";
}

int cmd_info(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "-h" || args[0] == "--help")) {
    std::cout << "usage: leanback info\n  prints the version, build type, the CPU's vector extensions and the "
                 "kernels chosen (LEANBACK_ISA=portable|avx2|avx512|avx512-vnni|avx512-bf16|amx caps "
                 "them), BLAS, threads, CUDA devices and the process's memory before any model\n";
    return 0;
  }
  if (!args.empty()) throw UsageError("info takes no arguments, got '" + args[0] + "'");
  std::cout << "leanback " << LEANBACK_VERSION << "\n"
            << "build type: " << LEANBACK_BUILD_TYPE << " (" << LEANBACK_ARCH
            << (std::string(LEANBACK_ARCH) == "native" ? ": -march=native" : ": baseline x86-64")
            << "; kernels chosen at run time)\n"
            << "CPU: " << cpu::isa_summary() << "\n"
            << "BLAS: " << openblas_get_config() << " (" << openblas_get_num_threads()
            << " threads)\n"
            << "float GEMM kernel: " << cpu::sgemm_kernel_name() << "\n"
            << "int8 GEMM kernel: " << cpu::int8_gemm_kernel() << "\n"
            << "HOT quantisers: " << cpu::quantize_kernel() << "\n"
            << "bf16 GEMM kernel: " << bf16_line() << "\n"
            << "OpenMP threads: " << omp_get_max_threads() << "\n";
  if (!cuda_compiled()) {
    std::cout << "CUDA: not compiled in\n";
  } else {
    const auto names = cuda_device_names();
    std::cout << "CUDA: compiled in, " << names.size() << " device(s)";
    for (size_t i = 0; i < names.size(); ++i) std::cout << (i ? ", " : ": ") << names[i];
    std::cout << "\n";
  }
  // What the process holds before any model: the libraries mapped and the runtimes' buffers.
  const ProcessMemory m = process_memory();
  std::cout << "process memory before any model: RSS " << m.rss_bytes / (1024 * 1024) << " MiB (max "
            << m.max_rss_bytes / (1024 * 1024) << " MiB)\n";
  return 0;
}

}  // namespace lb::cli
