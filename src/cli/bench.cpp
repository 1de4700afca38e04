// `leanback bench WORKLOAD`: micro-benchmarks printing one JSON line.
#include "src/cli/commands.h"

namespace lb::cli {

int cmd_bench(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("bench needs a workload (linear_bwd)");
  throw UsageError("unknown workload '" + args[0] + "'; valid: linear_bwd");
}

}  // namespace lb::cli
