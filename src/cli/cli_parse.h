// CLI11 glue shared by the subcommands: parse an argument vector (the arguments after the
// command name), turning --help into printed help (returns false: the command should exit 0)
// and parse errors into UsageError (exit 2) carrying CLI11's message and a hint.
#pragma once
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "lb/core/device.h"
#include "lb/train/config.h"
#include "src/cli/commands.h"

namespace lb::cli {

inline bool parse_cli(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + "\n  (" + app.get_name() + " --help lists the options)");
  }
  return true;
}

// --strategy's valid values: the types the strategy factory knows.
std::vector<std::string> strategy_names();

// --device: cpu, cuda or cuda:N, where this build and machine have that device; a usage error
// (exit 2) otherwise, before any work.
Device parse_device_flag(const std::string& flag);

// --threads: the CPU threads of every kernel (OpenMP, and OpenBLAS through it), as
// torch.set_num_threads; 0 leaves the default (OMP_NUM_THREADS, else every core).
void apply_threads_flag(int threads);

// --memory-budget SIZE: the config's memory.budget (the whole step), in place of its codecs
// and recompute lists (the planner chooses them); --activation-budget SIZE: its
// memory.activation_budget (activations only). A bad size, an empty one included, is a usage
// error naming the flag.
inline const char* kMemoryBudgetHelp =
    "plan the step so that all it holds (parameters, gradients, optimizer state, activations) fits SIZE (120MB, "
    "1.5GiB, or 0.1x of the exact vanilla step's peak); overrides memory.budget";
inline const char* kActivationBudgetHelp =
    "plan codecs and recomputation per block so that the step's activation peak fits SIZE (or 0.1x of the exact "
    "vanilla activation peak); overrides memory.activation_budget";
struct MemoryBudgetFlag {
  std::string text, activation_text;
  const CLI::Option* option = nullptr;
  const CLI::Option* activation_option = nullptr;
  // On the command line, even as an empty string (`--memory-budget ""` is an error, not "none").
  bool given() const { return option != nullptr && option->count() > 0; }
  bool activation_given() const { return activation_option != nullptr && activation_option->count() > 0; }
};
inline void add_memory_budget_option(CLI::App& app, MemoryBudgetFlag& flag, const std::string& help,
                                     const std::string& activation_help = kActivationBudgetHelp) {
  flag.option = app.add_option("--memory-budget", flag.text, help);
  flag.activation_option = app.add_option("--activation-budget", flag.activation_text, activation_help);
}
void apply_memory_budget_flag(train::Config& config, const MemoryBudgetFlag& flag);

// The flags every command spells the same way (the value is checked by parse_device_flag /
// the listed choices; --threads is applied by apply_threads_flag).
inline CLI::Option* add_device_option(CLI::App& app, std::string& device,
                                      const std::string& help = "cpu, or cuda / cuda:N") {
  return app.add_option("--device", device, help)->capture_default_str();
}
inline CLI::Option* add_threads_option(
    CLI::App& app, int& threads,
    const std::string& help = "CPU threads of every kernel (default: OMP_NUM_THREADS, else every core)",
    int lowest = 0, int highest = 1024) {
  return app.add_option("--threads", threads, help)->check(CLI::Range(lowest, highest));
}
inline CLI::Option* add_precision_option(CLI::App& app, std::string& precision,
                                         const std::vector<std::string>& choices, const std::string& help) {
  return app.add_option("--precision", precision, help)->check(CLI::IsMember(choices))->capture_default_str();
}

}  // namespace lb::cli
