// `leanback info`: version, build type, BLAS, threads, CUDA.
#include <omp.h>

#include <iostream>

#include "lb/core/cuda_runtime_info.h"
#include "src/cli/commands.h"
#include "src/cpu/sgemm_avx512.h"

extern "C" char* openblas_get_config();
extern "C" int openblas_get_num_threads();

namespace lb::cli {

std::string usage() {
  return "usage: leanback <command> [options]   (leanback <command> --help for its options)\n"
         "  train CONFIG [--strategy vanilla|instant|hot] [--set key=value]... [--out DIR]\n"
         "        [--resume DIR] [--seed N] [--overwrite]\n"
         "                               train from a JSON config (configs/README.md)\n"
         "  eval CONFIG --checkpoint DIR [--split S] [--predictions FILE.jsonl]\n"
         "                               metrics of a checkpoint on a labeled split\n"
         "  predict CONFIG --checkpoint DIR --out DIR\n"
         "                               test-split predictions as GLUE submission files\n"
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
         "                               WordPiece tokens/s on SST-2 train, one thread\n";
}

int cmd_info(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "-h" || args[0] == "--help")) {
    std::cout << "usage: leanback info\n  prints the version, build type, BLAS, float GEMM kernel, "
                 "threads and CUDA devices\n";
    return 0;
  }
  if (!args.empty()) throw UsageError("info takes no arguments, got '" + args[0] + "'");
  std::cout << "leanback " << LEANBACK_VERSION << "\n"
            << "build type: " << LEANBACK_BUILD_TYPE << "\n"
            << "BLAS: " << openblas_get_config() << " (" << openblas_get_num_threads()
            << " threads)\n"
            << "float GEMM kernel: " << cpu::sgemm_kernel_name() << "\n"
            << "OpenMP threads: " << omp_get_max_threads() << "\n";
  if (!cuda_compiled()) {
    std::cout << "CUDA: not compiled in\n";
  } else {
    const auto names = cuda_device_names();
    std::cout << "CUDA: compiled in, " << names.size() << " device(s)";
    for (size_t i = 0; i < names.size(); ++i) std::cout << (i ? ", " : ": ") << names[i];
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lb::cli
