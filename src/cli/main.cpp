// leanback command-line entry: dispatches to subcommands; lb::Error becomes a message on
// stderr and exit code 1 (2 for usage errors).
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "src/cli/commands.h"
#include "src/cli/tokenize.h"
#include "lb/core/error.h"
#include "lb/dist/process_group.h"
#include "lb/train/run/run_info.h"
#include "src/cpu/cpu_features.h"

namespace {
// Under mpirun, a rank that fails ends the whole job (the others would wait in a collective).
int fail(const std::string& cmd, const std::string& msg, int code) {
  if (lb::dist::launched_by_mpi() && lb::dist::mpi_compiled()) {
    lb::dist::ProcessGroup& g = lb::dist::world();
    if (g.size() > 1) {
      std::cerr << "leanback " << cmd << " (rank " << g.rank() << " of " << g.size() << "): " << msg
                << "\n" << std::flush;
      g.abort(code);
    }
  }
  std::cerr << "leanback " << cmd << ": " << msg << "\n";
  return code;
}

std::string where(const lb::Error& e, bool verbose) {
  return verbose && !e.where().empty() ? " " + e.where() : "";
}
}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) the kernel would kill the process mid-write (SIGXFSZ,
  // exit 153); ignored, the write fails with EFBIG and the writer names the file, leaving the
  // last complete checkpoint as it was (writes are staged and renamed).
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::cout << lb::cli::usage();
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    const std::string commit = lb::train::git_commit();
    std::cout << "leanback " << LEANBACK_VERSION << " (" << (commit == "unknown" ? commit : commit.substr(0, 12))
              << ", " << LEANBACK_BUILD_TYPE << ", " << LEANBACK_ARCH << " build)\n";
    return 0;
  }
  // --verbose (anywhere) or LEANBACK_DEBUG=1: errors also say where in leanback they arose.
  const char* debug_env = std::getenv("LEANBACK_DEBUG");
  bool verbose = debug_env != nullptr && *debug_env != '\0' && std::string(debug_env) != "0";
  if (const auto it = std::remove(args.begin(), args.end(), std::string("--verbose")); it != args.end()) {
    args.erase(it, args.end());
    verbose = true;
  }
  if (args.empty()) {
    std::cout << lb::cli::usage();
    return 2;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  try {
    lb::cpu::check_isa_env();  // a mistyped LEANBACK_ISA fails before any work
    if (cmd == "info") return lb::cli::cmd_info(args);
    if (cmd == "bench") return lb::cli::cmd_bench(args);
    if (cmd == "train") return lb::cli::cmd_train(args);
    if (cmd == "eval") return lb::cli::cmd_eval(args);
    if (cmd == "predict") return lb::cli::cmd_predict(args);
    if (cmd == "export") return lb::cli::cmd_export(args);
    if (cmd == "plan") return lb::cli::cmd_plan(args);
    if (cmd == "compare") return lb::cli::cmd_compare(args);
    if (cmd == "plot") return lb::cli::cmd_plot(args);
    if (cmd == "tokenize") return lb::cli::cmd_tokenize(args);
    std::cerr << "leanback: unknown command '" << cmd << "'\n" << lb::cli::usage();
    return 2;
  } catch (const lb::cli::UsageError& e) {
    return fail(cmd, e.what(), 2);
  } catch (const lb::Error& e) {
    return fail(cmd, std::string("error: ") + e.what() + where(e, verbose), 1);
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refused (too long, /proc, permissions): name it and the reason.
    std::string paths = e.path1().string();
    if (!e.path2().empty()) paths += " -> " + e.path2().string();
    return fail(cmd, "error: " + paths + ": " + e.code().message(), 1);
  } catch (const std::exception& e) {
    return fail(cmd, std::string("unexpected error: ") + e.what(), 1);
  }
}
