// `leanback train CONFIG [--strategy S] [--set k=v]... [--out DIR] [--resume DIR] [--seed N]
// [--device cpu] [--overwrite]`: trains from a config file (lb/train/trainer.h). Ctrl-C saves
// a resumable checkpoint and exits with status 130; a second Ctrl-C kills at once.
#include <csignal>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "lb/nn/backward/factory.h"
#include "lb/train/trainer.h"
#include "src/cli/cli_parse.h"

namespace lb::cli {

std::vector<std::string> strategy_names() { return nn::backward::strategy_types(); }

namespace {
void on_sigint(int) {
  train::stop_requested() = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}
}  // namespace

int cmd_train(const std::vector<std::string>& args) {
  CLI::App app{"Train a model from a JSON config (keys: configs/README.md).", "leanback train"};
  std::string config_path, device = "cpu";
  std::vector<std::string> sets;
  train::TrainOptions opt;
  int64_t seed = -1;
  bool no_progress = false;
  app.add_option("config", config_path, "the run's JSON config")->required();
  app.add_option("--strategy", opt.strategy,
                 "backward of every compressible Linear/Conv2d (overrides the config's rules)")
      ->check(CLI::IsMember(strategy_names()));
  app.add_option("--set", sets, "override a config key, e.g. --set optimizer.lr=3e-5 (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--out", opt.out_dir, "run directory (default: output.dir, else runs/<config name>)");
  app.add_option("--resume", opt.resume, "continue from a run directory or one of its checkpoints");
  app.add_option("--seed", seed, "seed of every random stream (overrides train.seed)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", device, "cpu (the CUDA backend's ops are not available yet)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--overwrite", opt.overwrite, "replace an existing, non-empty run directory");
  app.add_flag("--no-progress", no_progress, "plain log lines even on a terminal");
  if (!parse_cli(app, args)) return 0;
  if (device != "cpu")
    throw UsageError("--device " + device + ": the CUDA backend cannot run training ops yet; use --device cpu");
  if (seed >= 0) opt.seed = static_cast<uint64_t>(seed);
  if (no_progress) opt.progress = 0;
  if (!opt.resume.empty() && opt.out_dir.empty()) {
    // Continue in the run directory the checkpoint belongs to.
    const std::string ck = train::find_checkpoint(opt.resume);
    opt.out_dir = ck == opt.resume ? std::filesystem::path(ck).parent_path().string() : opt.resume;
  }
  const train::Config config = train::load_config(config_path, sets);
  std::signal(SIGINT, on_sigint);
  const train::TrainResult r = train::train(config, opt);
  std::signal(SIGINT, SIG_DFL);
  if (r.interrupted) {
    std::cerr << "leanback train: interrupted at step " << r.steps << "; checkpoint "
              << r.last_checkpoint << "\n  resume: leanback train " << config_path << " --resume "
              << r.run_dir << "\n";
    return 130;
  }
  std::cout << r.final_eval.dump() << "\n";
  std::cerr << std::fixed << std::setprecision(2) << "trained " << r.losses.size() << " steps in "
            << r.train_runtime_s / 60.0 << " min (" << std::setprecision(1) << r.train_samples_per_second
            << " examples/s)\nrun directory: " << r.run_dir << " (metrics.jsonl, eval_results.json, "
            << "best checkpoint " << r.best_checkpoint << ")\n";
  return 0;
}

}  // namespace lb::cli
