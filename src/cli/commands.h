// The CLI's subcommands; each takes its arguments (after the command name) and returns the
// process exit code. Bad flags throw UsageError (exit 2).
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace lb::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string usage();
int cmd_info(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_train(const std::vector<std::string>& args);
int cmd_eval(const std::vector<std::string>& args);
int cmd_predict(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);
int cmd_plan(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
int cmd_plot(const std::vector<std::string>& args);

}  // namespace lb::cli
