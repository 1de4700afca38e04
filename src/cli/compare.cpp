// `leanback compare CONFIG --strategies vanilla,instant,hot [--seeds N] [--set k=v]... [--out DIR]`
// (lb/train/report/compare.h) and `leanback plot RUN_DIR|COMPARE_DIR` (lb/train/report/plots.h).
#include <filesystem>
#include <iostream>

#include "lb/io/atomic_file.h"
#include "lb/train/report/compare.h"
#include "lb/train/memory/memory_planner.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/report/plots.h"
#include "lb/train/trainer.h"
#include "src/cli/cli_parse.h"
#include "src/cli/stop_signals.h"

namespace lb::cli {

namespace {
void print_plots(const std::vector<std::string>& plots, const std::string& error) {
  if (!error.empty()) std::cerr << "leanback: warning: no plots: " << error << "\n";
  for (const auto& p : plots) std::cerr << "  " << p << "\n";
}
}  // namespace

int cmd_compare(const std::vector<std::string>& args) {
  CLI::App app{"Train one config under several backward strategies and seeds; print and write the "
               "comparison (report.json, report.md, plots/).",
               "leanback compare"};
  std::string config_path, strategies = "vanilla,instant,hot", device = "cpu";
  std::vector<std::string> sets;
  train::CompareOptions opt;
  bool no_progress = false, no_plots = false;
  app.add_option("config", config_path, "the runs' JSON config")->required();
  app.add_option("--strategies", strategies, "comma-separated strategies (default vanilla,instant,hot)");
  app.add_option("--seeds", opt.seeds, "runs per strategy, seeded train.seed, train.seed+1, ... (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  app.add_option("--set", sets, "override a config key for every run (repeatable)")->allow_extra_args(false);
  app.add_option("--out", opt.out_dir, "compare directory (default: <run dir>-compare)");
  MemoryBudgetFlag budget;
  add_memory_budget_option(app, budget, std::string(kMemoryBudgetHelp) + "; each run plans for it",
                           std::string(kActivationBudgetHelp) + "; each run plans for it");
  add_device_option(app, device,
                    "cpu, or cuda / cuda:N (every strategy has CUDA kernels, except HOT's f64 emulation oracle)");
  int threads = 0;
  add_threads_option(app, threads);
  app.add_flag("--no-plots", no_plots, "write the report without drawing plots");
  app.add_flag("--no-progress", no_progress, "plain log lines even on a terminal");
  if (!parse_cli(app, args)) return 0;
  apply_threads_flag(threads);
  opt.strategies.clear();
  const auto known = strategy_names();
  for (size_t start = 0; start <= strategies.size();) {
    const size_t comma = std::min(strategies.find(',', start), strategies.size());
    const std::string s = strategies.substr(start, comma - start);
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      std::string names;
      for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
      throw UsageError("--strategies: '" + s + "' is not a strategy (" + names + ")");
    }
    if (std::find(opt.strategies.begin(), opt.strategies.end(), s) != opt.strategies.end())
      throw UsageError("--strategies: '" + s + "' is listed twice");
    opt.strategies.push_back(s);
    start = comma + 1;
  }
  if (no_progress) opt.progress = 0;
  opt.plots = !no_plots;
  opt.device = parse_device_flag(device);
  train::Config config = train::load_config(config_path, sets);
  apply_memory_budget_flag(config, budget);
  train::CompareResult r;
  StopSignals signals;
  try {
    r = train::compare(config, opt);
  } catch (const train::PlanInterrupted& e) {
    std::cerr << "leanback compare: " << e.what() << " for the run being planned; finished runs are kept\n";
    return StopSignals::exit_code();
  }
  if (r.interrupted) {
    std::cerr << "leanback compare: interrupted; finished runs are kept and the interrupted one has a "
                 "checkpoint.\n  continue: the same command again (compare reuses "
              << r.dir << ")\n";
    return StopSignals::exit_code();
  }
  std::cout << train::report_table(r.report);
  std::cerr << "compare directory: " << r.dir << " (report.json, report.md"
            << (r.plots.empty() ? "" : ", plots/") << ")\n";
  print_plots(r.plots, r.plot_error);
  return 0;
}

int cmd_plot(const std::vector<std::string>& args) {
  CLI::App app{"Redraw the plots of a run or compare directory from its JSON files (matplotlib).",
               "leanback plot"};
  std::string dir;
  app.add_option("dir", dir, "a run directory (metrics.jsonl) or a compare directory (compare.json)")
      ->required();
  if (!parse_cli(app, args)) return 0;
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(dir) / "compare.json")) {
    // The report first: the plots read it.
    const nlohmann::json report = train::build_report(dir);
    train::record_written(dir, {"report.json", "report.md"});
    io::write_text_atomic((fs::path(dir) / "report.json").string(), report.dump(2) + "\n");
    const auto plots = train::draw_plots(dir);
    std::vector<std::string> rel;
    for (const auto& p : plots) rel.push_back(fs::relative(p, dir).string());
    io::write_text_atomic((fs::path(dir) / "report.md").string(), train::report_markdown(report, rel));
    std::cout << train::report_table(report);
    print_plots(plots, "");
    return 0;
  }
  print_plots(train::draw_plots(dir), "");
  return 0;
}

}  // namespace lb::cli
