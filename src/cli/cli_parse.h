// CLI11 glue shared by the subcommands: parse an argument vector (the arguments after the
// command name), turning --help into printed help (returns false: the command should exit 0)
// and parse errors into UsageError (exit 2) carrying CLI11's message and a hint.
#pragma once
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "lb/core/device.h"
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

// The flags every command spells the same way (the value is checked by parse_device_flag /
// the listed choices).
inline CLI::Option* add_device_option(CLI::App& app, std::string& device) {
  return app.add_option("--device", device, "cpu, or cuda / cuda:N")->capture_default_str();
}
inline CLI::Option* add_precision_option(CLI::App& app, std::string& precision,
                                         const std::vector<std::string>& choices, const std::string& help) {
  return app.add_option("--precision", precision, help)->check(CLI::IsMember(choices))->capture_default_str();
}

}  // namespace lb::cli
