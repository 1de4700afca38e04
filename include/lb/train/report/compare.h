// `leanback compare`: one config trained under several backward strategies and seeds, side
// by side. Every (strategy, seed) run is an ordinary `train` run directory, with the same
// initialisation and data order across strategies (both follow the seed alone); a finished
// run is reused and an interrupted one resumed, so a comparison stopped at any point
// continues where it was when rerun with the same command.
//
// Compare directory:
//   compare.json          the config (after --set), strategies and seeds; a later compare
//                         into the same directory must have the same config
//   <strategy>/seed-<s>/  the runs (train's run directory layout, lb/train/trainer.h)
//   report.json           per strategy: the task metrics (mean ± std over seeds, difference
//                         from vanilla), step / forward / backward time, examples/s, bytes
//                         saved for backward (measured mean and peak; the papers' figure),
//                         backward FLOPs, allocator peak by tag, calibration share, and per
//                         layer the ranks INSTANT chose and the quantisers HOT chose
//   report.md             the same as tables, with the plots
//   plots/*.png           drawn by `leanback plot` (matplotlib), see lb/train/report/plots.h
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/device.h"
#include "lb/train/config.h"

namespace lb::train {

struct CompareOptions {
  std::vector<std::string> strategies = {"vanilla", "instant", "hot"};
  int64_t seeds = 1;       // runs per strategy, seeded train.seed, train.seed + 1, ...
  std::string out_dir;     // "" = <output.dir or runs/<config stem>>-compare
  bool plots = true;       // draw plots/ after the report (skipped with a warning if impossible)
  int progress = -1;       // as TrainOptions
  bool quiet = false;
  Device device = Device::cpu();  // as TrainOptions
  // Test hook: the first run that trains in this call behaves as if Ctrl-C came after this
  // many optimizer steps.
  int64_t interrupt_after = 0;
};

struct CompareResult {
  std::string dir;
  bool interrupted = false;
  nlohmann::json report;   // report.json's content (empty when interrupted)
  std::vector<std::string> plots;  // files written
  std::string plot_error;          // why plots were not drawn, if they were not
};

CompareResult compare(const Config& config, const CompareOptions& opt);

// report.json's content, from a compare directory's compare.json and run directories.
nlohmann::json build_report(const std::string& compare_dir);
// The table `compare` prints: one row per strategy.
std::string report_table(const nlohmann::json& report);
// report.md: the table, per-layer detail of the compressed strategies, the plots.
std::string report_markdown(const nlohmann::json& report, const std::vector<std::string>& plots);

}  // namespace lb::train
