// `leanback train CONFIG [--strategy S] [--set k=v]... [--out DIR] [--resume DIR] [--seed N]
// [--device cpu|cuda[:N]] [--overwrite]`: trains from a config file (lb/train/trainer.h). Ctrl-C saves
// a resumable checkpoint and exits with status 130; a second Ctrl-C kills at once.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <thread>

#include "lb/core/cuda_runtime_info.h"
#include "lb/dist/process_group.h"
#include "lb/nn/backward/factory.h"
#include "lb/train/trainer.h"
#include "src/cli/cli_parse.h"

namespace lb::cli {

std::vector<std::string> strategy_names() { return nn::backward::strategy_types(); }

Device parse_device_flag(const std::string& flag) {
  Device d;
  try {
    d = Device::parse(flag);
  } catch (const Error& e) {
    throw UsageError(std::string("--device: ") + e.what());
  }
  if (d.is_cuda() && d.index >= cuda_device_count())
    throw UsageError("--device " + flag + ": " +
                     (cuda_compiled() ? "this machine has " + std::to_string(cuda_device_count()) + " CUDA device(s)"
                                      : std::string("this leanback was built without CUDA")));
  return d;
}

namespace {
void on_sigint(int) {
  train::stop_requested() = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

// `--nproc N` on one machine: re-runs this command as N MPI ranks through mpirun (each with
// cores / N OpenMP threads). Returns only if exec fails.
[[noreturn]] void exec_mpirun(int64_t nproc, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"mpirun", "-np", std::to_string(nproc), "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");  // Open MPI refuses root otherwise
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string threads = omp && *omp ? omp : std::to_string(std::max<unsigned>(1, cores / static_cast<unsigned>(nproc)));
  argv.insert(argv.end(), {"-x", "OMP_NUM_THREADS=" + threads});
  argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  argv.push_back("train");
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") { ++i; continue; }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    argv.push_back(args[i]);
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::cout.flush();
  ::execvp("mpirun", cargv.data());
  throw Error("--nproc " + std::to_string(nproc) + ": cannot run mpirun (" + std::strerror(errno) +
              "); install Open MPI (apt-get install openmpi-bin libopenmpi-dev) or start the ranks yourself "
              "with mpirun -np N leanback train ...");
}
}  // namespace

int cmd_train(const std::vector<std::string>& args) {
  CLI::App app{"Train a model from a JSON config (keys: configs/README.md).", "leanback train"};
  std::string config_path, device = "cpu";
  std::vector<std::string> sets;
  train::TrainOptions opt;
  int64_t seed = -1;
  bool no_progress = false;
  int64_t nproc = 1;
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
  app.add_option("--device", device,
                 "cpu, or cuda / cuda:N (every layer vanilla for now: INSTANT's and HOT's kernels are CPU-only)");
  app.add_flag("--overwrite", opt.overwrite, "replace an existing, non-empty run directory");
  app.add_flag("--no-progress", no_progress, "plain log lines even on a terminal");
  app.add_option("--nproc", nproc,
                 "data-parallel over N processes on this machine (launches mpirun -np N; data.batch_size "
                 "is per process)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  if (!parse_cli(app, args)) return 0;
  if (nproc > 1 && !dist::launched_by_mpi()) {
    if (!dist::mpi_compiled())
      throw UsageError("--nproc " + std::to_string(nproc) + ": this leanback was built without MPI "
                       "(install libopenmpi-dev and rebuild)");
    exec_mpirun(nproc, args);
  }
  opt.device = parse_device_flag(device);
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
  if (!dist::world().is_main()) return r.interrupted ? 130 : 0;  // rank 0 reports
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
