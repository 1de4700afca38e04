// Facts about the run's environment recorded in metrics.jsonl and reports: the CPU, threads,
// kernels in use, build, and the git commit of the source tree.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace lb::train {

nlohmann::json environment_json();
// `git rev-parse HEAD` of the source tree leanback was built from, or "unknown".
std::string git_commit();
// /proc/cpuinfo's model name (or "unknown").
std::string cpu_model();
// Which kernel runs a bf16 run's products on this CPU, for the run's log.
std::string bf16_products_note();
// A warning for a run that gives some layer HOT's backward on a CPU whose int8 GEMM is the
// portable loop (no AVX2: many times slower than the f32 GEMM), naming the kernel and what
// is fast instead; "" where the int8 kernel is a vector one.
std::string hot_kernel_warning();

}  // namespace lb::train
