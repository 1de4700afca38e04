// `leanback bench WORKLOAD [--iters N] [--warmup N] [--strategy S] [--rank N] [--json]`: micro-benchmarks
// from a small registry (bench_workloads.h), printing one JSON line or a readable summary;
// `leanback bench CONFIG.json [--memory-budget SIZE]`: a config's step (bench_config.cpp).
#include <omp.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "lb/core/cuda_runtime_info.h"
#include "lb/nn/backward/factory.h"
#include "src/cli/bench_tokenize.h"
#include "src/cli/bench_workloads.h"
#include "src/cli/cli_parse.h"
#include "src/cli/commands.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/int8_gemm.h"
#include "src/cpu/sgemm_avx512.h"
#include "src/cpu/sgemm_bf16.h"
#include "lb/core/precision.h"

extern "C" int openblas_get_num_threads();
extern "C" char* openblas_get_corename();

namespace lb::cli {

const std::vector<BenchWorkload>& bench_workloads() {
  static const std::vector<BenchWorkload> w = {
      {"linear_bwd", "Linear 768->3072 (bias) on x (32, 128, 768) f32: forward + backward",
       bench_linear_bwd},
      {"conv_bwd", "Conv2d 3x3 64->64 pad 1 (bias) on x (64, 64, 32, 32) f32: forward + backward",
       bench_conv_bwd},
      {"bert_mini", "BERT L=4 H=256 (B 32, T 128) training step, AdamW", bench_bert_mini},
      {"bert_base", "BERT-base L=12 H=768 (B 32, T 128) training step, AdamW (for --device cuda)",
       bench_bert_base},
      {"vit_tiny", "ViT depth 12 dim 192 patch 4 on 32x32 (B 64) training step, AdamW", bench_vit_tiny},
      {"resnet18", "ResNet-18 CIFAR stem 32x32 (B 64) training step, SGD momentum", bench_resnet18},
  };
  return w;
}

nlohmann::json bench_json_head(const std::string& workload, const BenchOptions& opt) {
  return {{"workload", workload},     {"strategy", opt.strategy}, {"framework", "leanback"},
          {"device", opt.device.str()}, {"dtype", "f32"},          {"iters", opt.iters},
          {"warmup", opt.warmup},       {"threads", bench_threads()}};
}

nlohmann::json bench_threads() {
  return {{"omp", omp_get_max_threads()},
          {"blas", openblas_get_num_threads()},
          {"blas_core", openblas_get_corename()},
          {"isa", cpu::isa_name(cpu::isa_selected())},
          {"sgemm", cpu::sgemm_kernel_name()},
          {"int8_gemm", cpu::int8_gemm_kernel()}};
}

namespace {

std::string workload_names() {
  std::string s;
  for (const auto& w : bench_workloads()) s += (s.empty() ? "" : ", ") + w.name;
  return s + ", gemm, tokenize, codec, or a config (CONFIG.json)";
}

// nullopt: --help was printed.
std::optional<BenchOptions> parse_options(const std::vector<std::string>& args) {
  BenchOptions opt;
  std::string device = "cpu";
  CLI::App app{"A model or layer workload: forward + backward (+ optimizer) steps, timed.",
               "leanback bench " + args[0]};
  app.add_option("--iters", opt.iters, "timed iterations")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--warmup", opt.warmup, "untimed iterations first")->check(CLI::Range(0, 1000000))->capture_default_str();
  app.add_option("--strategy", opt.strategy, "backward of every compressible Linear/Conv2d")
      ->check(CLI::IsMember(strategy_names()))
      ->capture_default_str();
  app.add_option("--rank", opt.rank, "INSTANT's fixed R_x = R_y")->check(CLI::Range(1, 1000000));
  app.add_option("--gx-bits", opt.gx_bits, "HOT's g_x levels (config backward gx_bits)")->check(CLI::IsMember({4, 8}));
  add_precision_option(app, opt.precision, {"f32", "bf16", "tf32"},
                       "f32; bf16: every float product on bf16 operands; tf32 (CUDA)");
  add_device_option(app, device);
  int threads = 0;
  add_threads_option(app, threads);
  app.add_option("--codec", opt.codec, "every kept activation in this codec (config memory.codecs)")
      ->check(CLI::IsMember({"f32", "bf16", "int8", "int4", "int2"}));
  app.add_flag("--recompute", opt.recompute, "every block recomputed in backward (config memory.recompute)");
  app.add_flag("--json", opt.json, "one JSON line");
  MemoryBudgetFlag budget;
  add_memory_budget_option(app, budget, "plans a config's model: leanback bench CONFIG.json --memory-budget SIZE",
                           "plans a config's model: leanback bench CONFIG.json --activation-budget SIZE");
  if (!parse_cli(app, std::vector<std::string>(args.begin() + 1, args.end()))) return std::nullopt;
  if (budget.given() || budget.activation_given()) {
    const std::string flag = budget.given() ? "--memory-budget" : "--activation-budget";
    throw UsageError(flag + ": the planner plans a config's model and data, and " + args[0] + " has no config; " +
                     "give one: leanback bench CONFIG.json " + flag + " " +
                     (budget.given() ? budget.text : budget.activation_text));
  }
  opt.device = parse_device_flag(device);
  apply_threads_flag(threads);
  return opt;
}

std::string summary(const nlohmann::json& r) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << r.value("workload", "?") << " ["
     << r.value("strategy", "?") << "]: " << r.value("ms_per_step", 0.0) << " ms/step (forward "
     << r.value("forward_ms", 0.0) << " ms, backward " << r.value("backward_ms", 0.0)
     << " ms";
  if (r.contains("optimizer_ms")) os << ", optimizer " << r.value("optimizer_ms", 0.0) << " ms";
  os << ")";
  if (r.contains("codec")) os << ", codec " << r["codec"].get<std::string>();
  if (r.contains("recompute")) os << ", recompute";
  if (r.contains("gflops")) os << ", " << std::setprecision(1) << r.value("gflops", 0.0) << " GFLOP/s";
  if (r.contains("vanilla_equivalent_gflops"))
    os << ", " << std::setprecision(1) << r.value("vanilla_equivalent_gflops", 0.0)
       << " vanilla-equivalent GFLOP/s";
  if (r.contains("peak_bytes"))
    os << ", peak " << std::setprecision(1) << r.value("peak_bytes", int64_t{0}) / (1024.0 * 1024.0) << " MiB";
  os << ", saved "
     << std::setprecision(2) << r.value("saved_bytes", int64_t{0}) / (1024.0 * 1024.0)
     << " MiB, median of " << r.value("iters", 0) << " iters, threads omp "
     << r["threads"].value("omp", 0) << " / blas " << r["threads"].value("blas", 0) << " ("
     << r["threads"].value("blas_core", "?") << "), float GEMM "
     << r["threads"].value("sgemm", "?");
  if (r.value("precision", "f32") == "bf16") os << ", precision bf16 (" << r["threads"].value("bf16_gemm", "?") << ")";
  if (r.contains("backward_mflops_per_sample"))
    os << "; paper: " << std::setprecision(1) << r["backward_mflops_per_sample"].get<double>()
       << " backward MFLOPs/sample";
  if (r.contains("ranks"))
    os << ", ranks x " << r["ranks"]["x"] << " (" << r["ranks"]["x_axis"].get<std::string>()
       << ") / g_y " << r["ranks"]["g_y"] << " (" << r["ranks"]["g_y_axis"].get<std::string>() << ")";
  if (r.value("calibration_ms", 0.0) > 0)
    os << ", calibration " << std::setprecision(1) << r["calibration_ms"].get<double>() << " ms (untimed)";
  return os.str();
}

// `bench tokenize`: WordPiece tokens/s over a TSV's sentence column (SST-2 train by default).
int cmd_bench_tokenize(const std::vector<std::string>& args) {
  CLI::App app{"WordPiece tokenizer throughput, one thread (Hugging Face twin: tools/bench/tokenizer_hf.py).",
               "leanback bench tokenize"};
  std::string vocab = "../shared/data/bert-base-uncased", data = "../shared/data/glue/SST-2/train.tsv";
  int iters = 5;
  bool json = false;
  app.add_option("--vocab", vocab, "tokenizer directory or vocab.txt")->capture_default_str();
  app.add_option("--data", data, "TSV with a 'sentence' column")->capture_default_str();
  app.add_option("--iters", iters, "timed passes")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_flag("--json", json, "one JSON line");
  if (!parse_cli(app, std::vector<std::string>(args.begin() + 1, args.end()))) return 0;
  const nlohmann::json r = bench_tokenize(vocab, data, iters);
  if (json) std::cout << r.dump() << std::endl;
  else
    std::cout << "tokenize: " << std::fixed << std::setprecision(2)
              << r.value("tokens_per_s", 0.0) / 1e6 << " M tokens/s (" << r.value("texts", 0)
              << " texts, " << r.value("tokens", 0) << " tokens, median pass "
              << std::setprecision(1) << r.value("ms", 0.0) << " ms, one thread)" << std::endl;
  return 0;
}

bool is_config_path(const std::string& a) { return a.size() > 5 && a.compare(a.size() - 5, 5, ".json") == 0; }

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  const auto is_help = [](const std::string& a) { return a == "-h" || a == "--help" || a == "help"; };
  if (!args.empty() && (is_help(args[0]) ||
                        (args.size() > 1 && is_help(args[1]) && args[0] != "gemm" &&
                         args[0] != "tokenize" && args[0] != "codec" &&
                         !is_config_path(args[0])))) {
    std::cout << "usage: leanback bench WORKLOAD [--strategy S] [--rank N] [--gx-bits B] [--iters N] "
                 "[--warmup N] [--precision f32|bf16|tf32] [--device cpu|cuda[:N]] [--json]\n"
                 "  --precision bf16                every float product on bf16 operands, f32 "
                 "accumulation\n"
                 "  --strategy vanilla|instant|hot  backward of every compressible Linear/Conv2d "
                 "(default vanilla)\n"
                 "  --rank N                        INSTANT's fixed R_x = R_y\n"
                 "  --gx-bits 4|8                   HOT's g_x levels (default 8)\n"
                 "  --codec f32|bf16|int8|int4|int2 every kept activation in that codec\n"
                 "  --recompute                     every block recomputed in backward\n"
                 "workloads:\n";
    for (const auto& w : bench_workloads())
      std::cout << "  " << std::left << std::setw(11) << w.name << w.description << "\n";
    std::cout << "  " << std::left << std::setw(11) << "gemm"
              << "GEMM GFLOP/s, ours vs OpenBLAS, or --precision bf16|int8 vs our f32\n"
              << std::setw(13) << "" << "(own flags: --m --n --k --ta --tb --threads --precision)\n";
    std::cout << "  " << std::left << std::setw(11) << "tokenize"
              << "WordPiece tokens/s on SST-2 train, one thread (own flags: --vocab --data --iters)\n";
    std::cout << "  " << std::left << std::setw(11) << "codec"
              << "kept-tensor codecs' encode/decode GB/s against a copy (own flags: --iters --device)\n";
    std::cout << "  " << std::left << std::setw(11) << "CONFIG.json"
              << "a config's training step on the batch the memory planner profiles (own flags:\n"
              << std::setw(13) << "" << "--memory-budget --strategy --set --iters --warmup --threads --json)\n";
    return 0;
  }
  if (args.empty() || args[0].rfind("--", 0) == 0)
    throw UsageError("bench needs a workload first (" + workload_names() + "); leanback bench --help");
  const std::string& name = args[0];
  if (name == "gemm") return cmd_bench_gemm(args);  // its own flags (bench_gemm.cpp)
  if (name == "tokenize") return cmd_bench_tokenize(args);
  if (name == "codec") return cmd_bench_codec(args);
  if (is_config_path(name)) return cmd_bench_config(args);
  for (const auto& w : bench_workloads()) {
    if (w.name != name) continue;
    const std::optional<BenchOptions> parsed = parse_options(args);
    if (!parsed) return 0;
    const BenchOptions& opt = *parsed;
    const MatmulPrecisionScope precision(matmul_precision_from_name(opt.precision));
    nlohmann::json r = w.run(opt);
    r["precision"] = opt.precision;
    r["threads"]["bf16_gemm"] = opt.precision == "bf16" && cpu::sgemm_bf16_preferred()
                                    ? cpu::sgemm_bf16_kernel_name()
                                    : "f32 kernel on rounded operands";
    if (opt.precision != "bf16") r["threads"].erase("bf16_gemm");
    std::cout << (opt.json ? r.dump() : summary(r)) << std::endl;
    return 0;
  }
  throw UsageError("unknown workload '" + name + "'; valid: " + workload_names());
}

}  // namespace lb::cli
