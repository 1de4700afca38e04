// `leanback train CONFIG [--strategy S] [--set k=v]... [--out DIR] [--resume DIR] [--seed N]
// [--device cpu|cuda[:N]] [--overwrite]`: trains from a config file (lb/train/trainer.h). Ctrl-C or
// SIGTERM saves a resumable checkpoint and exits with status 130 / 143 (stop_signals.h).
#include <fcntl.h>
#include <sys/wait.h>
#include <omp.h>
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
#include "lb/train/memory/memory_planner.h"
#include "lb/train/trainer.h"
#include "src/cli/cli_parse.h"
#include "src/cli/stop_signals.h"

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

void apply_memory_budget_flag(train::Config& config, const MemoryBudgetFlag& flag) {
  const bool step = flag.given(), activations = flag.activation_given();
  if (!step && !activations) return;
  const char* name = step ? "--memory-budget" : "--activation-budget";
  if (step && activations)
    throw UsageError("--memory-budget and --activation-budget: give one (the first bounds the whole step, the "
                     "second its activations only)");
  if (const std::string given = config.memory.planned_settings_given(); !given.empty())
    throw UsageError(std::string(name) + ": the planner chooses memory.codecs, memory.recompute and "
                     "memory.recompute_bf16 itself, and " + config.source + " sets " + given +
                     " (in the file or by --set); give the budget or those, not both");
  try {
    config.memory.budget = train::MemoryBudget::parse(step ? flag.text : flag.activation_text, name,
                                                      step ? train::BudgetScope::Step : train::BudgetScope::Activation);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

void apply_threads_flag(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

namespace {
volatile std::sig_atomic_t g_launcher_signal = 0;
volatile pid_t g_mpirun_pid = -1;

// The launcher's Ctrl-C / SIGTERM: mpirun (in its own process group, so the terminal's
// Ctrl-C reaches it only this way) gets SIGUSR1, which it passes on to every rank at once
// (its own SIGINT/SIGTERM handling would SIGKILL the ranks a second later); the ranks stop
// after their step together and rank 0 writes a checkpoint.
void forward_to_mpirun(int sig) {
  g_launcher_signal = sig;
  if (g_mpirun_pid > 0) ::kill(g_mpirun_pid, SIGUSR1);
}

// `--nproc N` on one machine: runs this command as N MPI ranks through mpirun (each with
// cores / N OpenMP threads) and waits for it. Exit status: 130 / 143 / 129 when the launcher
// was stopped by SIGINT / SIGTERM / SIGHUP, else mpirun's.
int run_mpirun(int64_t nproc, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"mpirun", "-np", std::to_string(nproc), "--oversubscribe", "--bind-to", "none",
                                "--stdin", "none"};
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
  std::cerr.flush();
  int report[2];  // the child's exec errno, if exec fails (closed on a successful exec)
  LB_CHECK(::pipe2(report, O_CLOEXEC) == 0, "--nproc: pipe: ", std::strerror(errno));
  // Handlers first, so a signal between fork and wait is not lost (exec resets them in the
  // child). SIGHUP (the terminal went away) stops the job the same way.
  struct sigaction sa {};
  sa.sa_handler = forward_to_mpirun;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  const pid_t pid = ::fork();
  LB_CHECK(pid >= 0, "--nproc: fork: ", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::close(report[0]);
    ::execvp("mpirun", cargv.data());
    const int err = errno;
    [[maybe_unused]] const ssize_t w = ::write(report[1], &err, sizeof err);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(report[1]);
  int exec_errno = 0;
  ssize_t got;
  do got = ::read(report[0], &exec_errno, sizeof exec_errno); while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    ::waitpid(pid, nullptr, 0);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
    throw Error("--nproc " + std::to_string(nproc) + ": cannot run mpirun (" + std::strerror(exec_errno) +
                "); install Open MPI (apt-get install openmpi-bin libopenmpi-dev) or start the ranks yourself "
                "with mpirun -np N leanback train ...");
  }
  g_mpirun_pid = pid;
  if (g_launcher_signal != 0) ::kill(pid, SIGUSR1);  // arrived before the pid was known
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  if (g_launcher_signal != 0) return 128 + static_cast<int>(g_launcher_signal);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}
// One argument as the shell reads it back: bare when it is plain, else in single quotes.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                       "0123456789-_./=:,+@%") == std::string::npos;
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command that continues an interrupted run as it began: the flags that shape it (the
// run keeps its memory plan itself, and --resume names its directory).
std::string resume_command(const std::string& config_path, const std::vector<std::string>& sets,
                           const train::TrainOptions& opt, const std::string& device, int threads, int64_t nproc,
                           const std::string& run_dir) {
  std::string c = "leanback train " + shell_word(config_path);
  for (const auto& s : sets) c += " --set " + shell_word(s);
  if (!opt.strategy.empty()) c += " --strategy " + shell_word(opt.strategy);
  if (opt.seed) c += " --seed " + std::to_string(*opt.seed);
  if (device != "cpu") c += " --device " + shell_word(device);
  if (threads > 0) c += " --threads " + std::to_string(threads);
  if (nproc > 1) c += " --nproc " + std::to_string(nproc);
  return c + " --resume " + shell_word(run_dir);
}
}  // namespace

int cmd_train(const std::vector<std::string>& args) {
  CLI::App app{"Train a model from a JSON config (keys: configs/README.md).", "leanback train"};
  std::string config_path, device = "cpu";
  MemoryBudgetFlag budget;
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
  add_memory_budget_option(app, budget, kMemoryBudgetHelp);
  app.add_option("--memory-plan", opt.memory_plan,
                 "train under a saved memory plan instead of planning (leanback plan CONFIG --memory-budget SIZE "
                 "--json > FILE, or a run's memory_plan.json): made once for a config, it serves every seed");
  app.add_option("--out", opt.out_dir, "run directory (default: output.dir, else runs/<config name>)");
  app.add_option("--resume", opt.resume, "continue from a run directory or one of its checkpoints");
  app.add_option("--seed", seed, "seed of every random stream (overrides train.seed)")
      ->check(CLI::NonNegativeNumber);
  add_device_option(app, device,
                    "cpu, or cuda / cuda:N (every strategy has CUDA kernels, except HOT's f64 emulation oracle)");
  int threads = 0;
  add_threads_option(app, threads, "CPU threads of every kernel, per process (default: OMP_NUM_THREADS, else every "
                                   "core, divided among --nproc processes)");
  app.add_flag("--overwrite", opt.overwrite,
               "replace an earlier run in the run directory (only a directory leanback created; only the files it wrote)");
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
    return run_mpirun(nproc, args);
  }
  opt.device = parse_device_flag(device);
  apply_threads_flag(threads);
  if (seed >= 0) opt.seed = static_cast<uint64_t>(seed);
  if (no_progress) opt.progress = 0;
  if (!opt.resume.empty() && opt.out_dir.empty()) {
    // Continue in the run directory the checkpoint belongs to.
    const std::string ck = train::find_checkpoint(opt.resume);
    opt.out_dir = ck == opt.resume ? std::filesystem::path(ck).parent_path().string() : opt.resume;
  }
  train::Config config = train::load_config(config_path, sets);
  apply_memory_budget_flag(config, budget);
  train::TrainResult r;
  StopSignals signals;
  try {
    r = train::train(config, opt);
  } catch (const train::PlanInterrupted& e) {
    std::cerr << "leanback train: " << e.what() << "\n";
    return StopSignals::exit_code();
  }
  if (!dist::world().is_main()) return r.interrupted ? StopSignals::exit_code() : 0;  // rank 0 reports
  if (r.interrupted) {
    std::cerr << "leanback train: interrupted at step " << r.steps << "; checkpoint "
              << r.last_checkpoint << "\n  resume: "
              << resume_command(config_path, sets, opt, device, threads, dist::world().size(), r.run_dir) << "\n";
    return StopSignals::exit_code();
  }
  std::cout << r.final_eval.dump() << "\n";
  std::cerr << std::fixed << std::setprecision(2) << "trained " << r.losses.size() << " steps in "
            << r.train_runtime_s / 60.0 << " min (" << std::setprecision(1) << r.train_samples_per_second
            << " examples/s)\nrun directory: " << r.run_dir << " (metrics.jsonl, eval_results.json, "
            << "best checkpoint " << r.best_checkpoint << ")\n";
  return 0;
}

}  // namespace lb::cli
