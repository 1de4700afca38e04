// The training loop (see trainer.h).
#include "lb/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

#include "lb/autograd/node.h"
#include "lb/core/allocator.h"
#include "lb/core/error.h"
#include "lb/core/precision.h"
#include "lb/core/random.h"
#include "lb/core/storage.h"
#include "lb/dist/nccl_group.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"
#include "lb/nn/backward/accounting.h"
#include "lb/nn/backward/calibration.h"
#include "lb/nn/backward/policy.h"
#include "lb/ops/elementwise.h"
#include "lb/optim/lr_schedule.h"
#include "lb/optim/optimizer.h"
#include "lb/train/checkpoint.h"
#include "lb/train/evaluate.h"
#include "lb/train/grad_probe.h"
#include "lb/train/metrics_log.h"
#include "lb/train/output_dir.h"
#include "lb/train/progress.h"
#include "lb/train/run_info.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"
#include "src/train/data_parallel.h"

namespace lb::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

std::string resolve_run_dir(const Config& config, const TrainOptions& opt) {
  if (!opt.out_dir.empty()) return opt.out_dir;
  if (!config.output.dir.empty()) return config.output.dir;
  return (fs::path("runs") / fs::path(config.source).stem()).string();
}

namespace {

int64_t checkpoint_step(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.rfind("checkpoint-", 0) != 0) return -1;
  try {
    size_t used = 0;
    const int64_t s = std::stoll(name.substr(11), &used);
    return used == name.size() - 11 ? s : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::string find_checkpoint(const std::string& path, const std::string& flag) {
  LB_CHECK(fs::is_directory(path), flag, " ", path, ": no such directory");
  if (fs::exists(fs::path(path) / "trainer_state.json")) return path;
  int64_t best = -1;
  std::string found;
  for (const auto& e : fs::directory_iterator(path)) {
    const int64_t s = checkpoint_step(e.path());
    if (s > best && fs::exists(e.path() / "trainer_state.json")) {
      best = s;
      found = e.path().string();
    }
  }
  LB_CHECK(!found.empty(), flag, " ", path,
           ": no checkpoint in it (expected trainer_state.json, or checkpoint-<step>/ folders)");
  return found;
}

namespace {

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, nn::Module& model) {
  const OptimizerSection& o = c.optimizer;
  const auto named = model.named_parameters();
  auto groups = optim::param_groups_with_decay(named, o.lr, o.weight_decay, o.no_decay);
  if (o.type == "sgd") {
    optim::SgdOptions s;
    s.momentum = o.momentum;
    s.nesterov = o.nesterov;
    return std::make_unique<optim::SGD>(std::move(groups), s);
  }
  optim::AdamOptions a;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  a.decoupled = o.type == "adamw";
  return std::make_unique<optim::Adam>(std::move(groups), a);
}

optim::LrSchedule make_schedule(const ScheduleSection& s, int64_t total_steps) {
  optim::LrSchedule sch;
  sch.kind = s.type == "linear"   ? optim::ScheduleKind::Linear
             : s.type == "cosine" ? optim::ScheduleKind::Cosine
                                  : optim::ScheduleKind::Constant;
  sch.total_steps = total_steps;
  sch.warmup_steps = s.warmup_steps > 0
                         ? s.warmup_steps
                         : static_cast<int64_t>(std::ceil(s.warmup_ratio * static_cast<double>(total_steps)));
  if (sch.kind != optim::ScheduleKind::Constant)
    sch.warmup_steps = std::min(sch.warmup_steps, std::max<int64_t>(total_steps - 1, 0));
  sch.min_ratio = s.min_ratio;
  return sch;
}

// The first parameter whose gradient holds a NaN/inf, as "name (layer L runs S)".
std::string first_bad_gradient(nn::Module& model,
                               const std::vector<std::shared_ptr<nn::backward::Strategy>>& strategies) {
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    const auto v = g.to_double_vector();
    if (std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); })) continue;
    std::string where = name;
    for (const auto& s : strategies) {
      if (name.rfind(s->layer_name() + ".", 0) == 0)
        return where + " (layer " + s->layer_name() + ", backward strategy " + s->type() + ")";
    }
    return where;
  }
  return "";
}

struct LoopState {
  int64_t step = 0;             // optimizer steps done
  int64_t calib_batches = 0;    // calibration micro-batches drawn so far
  double best_metric = -std::numeric_limits<double>::infinity();
  int64_t best_step = -1;
  std::vector<int64_t> checkpoints;  // steps with a checkpoint on disk, oldest first
  nlohmann::json best_eval = nlohmann::json::object();
  // Totals over the whole run, across resumes (eval_results.json and compare report them).
  double train_ms = 0;          // optimizer steps only (no evaluation, calibration, saving)
  int64_t train_examples = 0;
  int64_t timed_steps = 0;      // the steps train_ms covers
  double probe_ms = 0;          // the gradient-fidelity probe (train.grad_probe_every)
  int64_t calibrations = 0;     // before this process's Calibrator, which counts its own
  double calibration_ms = 0;
  std::vector<int64_t> calibration_steps;

  nlohmann::json to_json() const {
    return {{"step", step},           {"calib_batches", calib_batches},
            {"best_metric", std::isfinite(best_metric) ? nlohmann::json(best_metric) : nlohmann::json()},
            {"best_step", best_step}, {"checkpoints", checkpoints},
            {"best_eval", best_eval}, {"train_ms", train_ms},
            {"train_examples", train_examples}, {"timed_steps", timed_steps}, {"probe_ms", probe_ms},
            {"calibrations", calibrations}, {"calibration_ms", calibration_ms},
            {"calibration_steps", calibration_steps}};
  }
  void from_json(const nlohmann::json& j, const std::string& where) {
    try {
      const std::string at = where + ": extra.trainer";
      step = io::json_int(j, "step", 0, INT64_MAX, at);
      calib_batches = io::json_int(j, "calib_batches", 0, INT64_MAX, at);
      best_metric = j.contains("best_metric") && j.at("best_metric").is_null()
                        ? -std::numeric_limits<double>::infinity()
                        : io::json_number(j, "best_metric", at);
      best_step = io::json_int(j, "best_step", -1, INT64_MAX, at);
      checkpoints = j.at("checkpoints").get<std::vector<int64_t>>();
      best_eval = j.at("best_eval");
      // Totals: absent from checkpoints written before they were kept (counted from 0 then).
      if (j.contains("train_ms")) {
        train_ms = io::json_number(j, "train_ms", at);
        train_examples = io::json_int(j, "train_examples", 0, INT64_MAX, at);
        timed_steps = io::json_int(j, "timed_steps", 0, INT64_MAX, at);
        probe_ms = io::json_number(j, "probe_ms", at);
        calibrations = io::json_int(j, "calibrations", 0, INT64_MAX, at);
        calibration_ms = io::json_number(j, "calibration_ms", at);
        calibration_steps = j.at("calibration_steps").get<std::vector<int64_t>>();
      }
    } catch (const nlohmann::json::exception& e) {
      LB_FAIL(where, ": extra.trainer is malformed (", e.what(), ")");
    }
    LB_CHECK(step >= 0 && calib_batches >= 0 && train_ms >= 0 && probe_ms >= 0 && calibration_ms >= 0, where,
             ": extra.trainer has negative counters");
  }
};

}  // namespace

TrainResult train(const Config& config_in, const TrainOptions& opt) {
  Config config = config_in;
  if (opt.seed) config.train.seed = *opt.seed;
  const TrainSection& tc = config.train;
  TrainResult result;
  // Data-parallel: every rank runs this function; rank 0 alone writes files and logs.
  // On GPUs under mpirun (or torchrun's variables): one GPU per rank, its local rank's, and
  // the collectives over NCCL (which carries the strings and counts as well).
  Device device = opt.device;
  std::unique_ptr<dist::ProcessGroup> nccl_group;
  if (!opt.group && device.is_cuda() && dist::world().size() > 1) {
    LB_CHECK(dist::nccl_compiled(), "--device ", device.str(), " with ", dist::world().size(),
             " ranks: this build has no NCCL, which data-parallel training on GPUs runs over");
    device = Device::cuda(dist::nccl_device_of_this_rank());
    nccl_group = dist::make_nccl_group(device.index);
  }
  dist::ProcessGroup& pg = opt.group ? *opt.group : nccl_group ? *nccl_group : dist::world();
  const bool main_rank = pg.is_main();
  const int64_t world = pg.size();
  const fs::path run_dir = resolve_run_dir(config, opt);
  result.run_dir = run_dir.string();

  // ---- the run directory: never overwrite or delete what is not ours (output_dir.h) ----
  std::string resume_ckpt;
  if (!opt.resume.empty()) resume_ckpt = find_checkpoint(opt.resume);
  const bool resuming = !resume_ckpt.empty();
  // Rank 0 owns the run directory: it decides, and the other ranks take its verdict (they
  // would otherwise race with its first writes).
  bool replace = false;
  std::string refused;
  if (main_rank) {
    try {
      replace = run_dir_verdict(run_dir, resuming ? fs::path(resume_ckpt) : fs::path(), opt.overwrite);
    } catch (const OutputRefused& e) {
      refused = e.what();
    }
  }
  if (world > 1) pg.broadcast(refused, 0, "run directory check");
  if (!refused.empty()) throw OutputRefused(refused);

  // ---- data, model, strategies, optimizer (all validated before any training work) ----
  manual_seed(tc.seed);
  const TaskData data = load_task_data(config);
  std::string load_log;
  auto model = build_task_model(config, data.num_labels, data.vocab_size, &load_log);
  nn::Module& module = model->module();
  for (const auto& g : config.freeze) {
    try {
      module.freeze(g);
    } catch (const Error& e) {
      throw Error(config.source + ": freeze: " + e.what());
    }
  }
  const auto policy = nn::backward::Policy::from_json(config.backward, "backward");
  nn::backward::Plan plan;
  try {
    plan = policy.plan(module, opt.strategy);
  } catch (const Error& e) {
    throw Error(config.source + ": " + e.what());
  }
  // Padding: dynamic by default. BERT runs padding-free unless told not to (skip_padding
  // "auto" = true): token-wise layers see only the kept tokens, and INSTANT's token-axis
  // projections work per sequence (packed_sequences.h). Their bases span max_seq_len
  // positions and each sequence (or padded batch) of L tokens projects with their first L
  // columns (set_max_tokens, below).
  if (config.data.padding == "auto") config.data.padding = "dynamic";
  if (config.model.type == "bert") {
    if (config.model.skip_padding == "auto") config.model.skip_padding = "true";
    model->set_skip_padding(config.model.skip_padding == "true");
  }
  const auto strategies = policy.apply(module, opt.strategy);
  if (data.text)
    for (const auto& s : strategies) s->set_max_tokens(config.data.max_seq_len);
  if (!device.is_cpu()) {
    for (const auto& s : strategies)
      LB_CHECK(!s->cpu_only(s->on_conv()), "--device ", device.str(), ": layer ", s->layer_name(), " uses ",
               s->type(), ", whose ", s->on_conv() ? "Conv2d" : "Linear",
               " kernels run on the CPU only so far. HINT: --strategy vanilla");
    model->to(device);  // before the optimizer takes the parameters
  }
  nn::backward::Calibrator calibrator(strategies);
  calibrator.set_group(world > 1 ? &pg : nullptr);
  LB_CHECK(world == 1 || tc.grad_probe_every == 0, config.source,
           ": train.grad_probe_every is not supported with data-parallel training yet (run the probe "
           "with one process)");
  auto optimizer = make_optimizer(config, module);
  std::vector<Tensor> trainable;
  for (const auto& p : module.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  LB_CHECK(!trainable.empty(), config.source, ": freeze: every parameter is frozen; nothing to train");

  auto train_loader = make_loader(data, config, /*train_split=*/true, tc.seed, pg.rank(), world);
  auto calib_loader = make_loader(data, config, true, tc.seed ^ 0x5ca1ab1eULL, pg.rank(), world);
  auto eval_loader = make_loader(data, config, /*train_split=*/false, tc.seed);
  const int64_t batches = train_loader->batches_per_epoch();
  const int64_t k = tc.grad_accum;
  const int64_t steps_per_epoch = (batches + k - 1) / k;
  const int64_t total_steps =
      tc.max_steps > 0 ? tc.max_steps
                       : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(tc.epochs * static_cast<double>(steps_per_epoch))));
  const optim::LrSchedule schedule = make_schedule(config.schedule, total_steps);
  const int64_t eval_every = tc.eval_every > 0 ? tc.eval_every : steps_per_epoch;

  LoopState st;
  // Everything is validated: only now is an old run (with --overwrite) cleared, and only of
  // the files leanback wrote there.
  if (main_rank) {
    if (replace) {
      const auto kept = remove_owned_entries(run_dir, OutputKind::Run);
      if (!kept.empty() && !opt.quiet) {
        std::cerr << "--overwrite: kept " << kept.size() << " entr" << (kept.size() == 1 ? "y" : "ies")
                  << " of " << run_dir.string() << " that leanback did not write:";
        for (const auto& k : kept) std::cerr << " " << k;
        std::cerr << "\n";
      }
    }
    create_output_dir(run_dir, OutputKind::Run, "--out");
  }
  if (resuming) {
    // The config's rates and decay, which a resumed run applies (see below).
    std::vector<std::pair<double, double>> configured;
    for (const auto& g : optimizer->groups()) configured.emplace_back(g.initial_lr, g.weight_decay);
    const LoadedCheckpoint ck = load_checkpoint(resume_ckpt, module, optimizer.get());
    const std::string where = (fs::path(resume_ckpt) / "trainer_state.json").string();
    LB_CHECK(ck.state.contains("extra") && ck.state["extra"].contains("trainer"), where,
             ": not a checkpoint written by leanback train (no extra.trainer)");
    st.from_json(ck.state["extra"]["trainer"], where);
    result.last_checkpoint = resume_ckpt;  // the last good one, should this run diverge
    LB_CHECK(st.step == ck.step, where, ": trainer step ", st.step, " and optimizer step ", ck.step,
             " disagree");
    LB_CHECK(st.step <= total_steps, where, ": the checkpoint is at step ", st.step,
             ", past this config's ", total_steps, " steps");
    for (const auto& n : ck.notes) std::cerr << "resume: " << n << "\n";
    // A changed optimizer.lr / weight_decay takes effect (never recorded and then ignored): the
    // schedule continues from this step, scaled from the new peak rate.
    auto& groups = optimizer->groups();
    for (size_t i = 0; i < groups.size() && i < configured.size(); ++i) {
      if (groups[i].initial_lr != configured[i].first && main_rank)
        std::cerr << "resume: optimizer.lr is now " << configured[i].first << " (the checkpoint's run had "
                  << groups[i].initial_lr << "): the schedule continues from step " << ck.step
                  << " scaled from the new rate\n";
      if (groups[i].weight_decay != configured[i].second && main_rank)
        std::cerr << "resume: weight decay of parameter group " << i << " is now " << configured[i].second
                  << " (the checkpoint's run had " << groups[i].weight_decay << ")\n";
      groups[i].initial_lr = configured[i].first;
      groups[i].weight_decay = configured[i].second;
      groups[i].lr = configured[i].first * schedule.factor(ck.step);
    }
    // A changed config is allowed (e.g. a new lr), but then the run is no longer the one saved.
    if (ck.state["extra"].contains("config")) {
      const nlohmann::json saved = ck.state["extra"]["config"], now = config.to_json();
      std::string changed;
      for (auto it = now.begin(); it != now.end(); ++it)
        if (it.key() != "output" && (!saved.contains(it.key()) || saved[it.key()] != *it))
          changed += (changed.empty() ? "" : ", ") + it.key();
      if (!changed.empty())
        std::cerr << "resume: warning: the config differs from the checkpoint's in: " << changed
                  << " (the continued run will not equal an uninterrupted one)\n";
    }
    // Drop metric lines the resumed steps will write again.
    if (main_rank) truncate_metrics((run_dir / "metrics.jsonl").string(), st.step);
    // Checkpoints past the resumed one belong to the abandoned future.
    std::vector<int64_t> kept;
    for (int64_t s : st.checkpoints)
      if (s <= st.step && fs::exists(run_dir / ("checkpoint-" + std::to_string(s)))) kept.push_back(s);
    st.checkpoints = kept;
  }
  if (main_rank) {
    // Every default filled in, the backward strategies' settings included.
    nlohmann::json resolved = config.to_json();
    resolved["backward"] = policy.resolved_json();
    io::write_text_atomic((run_dir / "config.json").string(), resolved.dump(2) + "\n");
    io::write_text_atomic((run_dir / "plan.txt").string(), plan.table());
  }
  MetricsLog metrics((run_dir / "metrics.jsonl").string(), main_rank);
  // Same starting weights on every rank (they are initialised alike, and a resumed run loaded
  // the same checkpoint; the broadcast makes it so bitwise).
  GradientSync sync(pg, trainable,
                    std::max<int64_t>(1, static_cast<int64_t>(tc.bucket_cap_mb * 1024.0 * 1024.0)));
  if (world > 1) sync.broadcast_parameters();
  if (!resuming) {
    metrics.write({{"type", "run"},
                   {"config", config.to_json()},
                   {"model", model->model_config()},
                   {"parameters", module.num_parameters()},
                   {"trainable_parameters", module.num_parameters(true)},
                   {"train_examples", data.train_size()},
                   {"eval_examples", data.eval_size()},
                   {"eval_split", data.eval_split},
                   {"steps", total_steps},
                   {"steps_per_epoch", steps_per_epoch},
                   {"strategy_override", opt.strategy},
                   {"environment", environment_json()},
                   {"git_commit", git_commit()},
                   {"plan", plan.to_json()},
                   {"load_report", load_log}});
  }

  Logger log(opt.quiet || !main_rank);
  log.info("run directory " + run_dir.string() + (resuming ? " (resuming from " + resume_ckpt + ")" : ""));
  if (!load_log.empty()) log.info(load_log);
  log.info(std::to_string(data.train_size()) + " training examples, " + std::to_string(data.eval_size()) +
           " for evaluation (" + data.eval_split + "); " + std::to_string(total_steps) + " steps (" +
           std::to_string(steps_per_epoch) + " per epoch, batch " + std::to_string(config.data.batch_size) +
           " x " + std::to_string(k) + " accumulated); " + std::to_string(module.num_parameters(true)) +
           " trainable parameters");
  if (!opt.quiet && main_rank) std::cerr << plan.table();
  if (world > 1)
    log.info("data-parallel: " + std::to_string(world) + " ranks (" + pg.backend() + "), batch " +
             std::to_string(config.data.batch_size) + " per rank, " + std::to_string(config.data.batch_size * world) +
             " in all; gradients summed in " + std::to_string(sync.buckets()) + " bucket(s) of " +
             std::to_string(sync.bytes_per_step() / 1024) + " KiB in all per step");
  // Mixed precision for every product of this run (training, calibration, evaluation).
  const MatmulPrecisionScope precision(matmul_precision_from_name(tc.precision));
  if (tc.precision == "bf16")
    log.info("precision bf16: products on " + bf16_products_note());

  // The run's totals as a checkpoint records them: this process's calibrations added.
  const auto totals = [&](const LoopState& now) {
    LoopState t = now;
    const nlohmann::json cal = calibrator.report();
    t.calibrations += cal["calibrations"].get<int64_t>();
    t.calibration_ms += cal["ms_total"].get<double>();
    for (const auto& s : cal["steps"]) t.calibration_steps.push_back(s.get<int64_t>());
    return t;
  };
  const auto last_good = [&]() {
    return result.last_checkpoint.empty() ? std::string("; no checkpoint was written yet")
                                          : "; the last good checkpoint is " + result.last_checkpoint;
  };

  // ---- checkpoint save with retention ----
  auto save = [&](bool is_best) {
    if (!main_rank) return;
    const std::string name = "checkpoint-" + std::to_string(st.step);
    if (std::find(st.checkpoints.begin(), st.checkpoints.end(), st.step) == st.checkpoints.end())
      st.checkpoints.push_back(st.step);
    if (is_best) st.best_step = st.step;
    nlohmann::json extra = {{"trainer", totals(st).to_json()}, {"config", config.to_json()},
                            {"strategy_override", opt.strategy}};
    try {
      save_checkpoint((run_dir / name).string(), module, optimizer.get(), &schedule, extra);
    } catch (const NonFiniteState& e) {
      // The optimizer step made the state non-finite: the run diverged. The last checkpoint
      // (never deleted before a newer one is written) stays the last good one.
      throw Diverged("step " + std::to_string(st.step) + ": " + e.what() + last_good());
    }
    result.last_checkpoint = (run_dir / name).string();
    // Keep the newest keep_checkpoints and the best; delete the rest.
    std::vector<int64_t> keep;
    const int64_t n = static_cast<int64_t>(st.checkpoints.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = st.checkpoints[i];
      if (i >= n - tc.keep_checkpoints || s == st.best_step) {
        keep.push_back(s);
      } else if (const std::string k = remove_checkpoint_dir(run_dir / ("checkpoint-" + std::to_string(s)));
                 !k.empty()) {
        log.warn("retention: " + k);
      }
    }
    st.checkpoints = keep;
  };

  auto run_eval = [&]() {
    if (!main_rank) return std::make_pair(nlohmann::json(), false);  // rank 0 evaluates
    if (opt.before_eval) opt.before_eval(st.step);
    EvalOutput ev = evaluate(*model, *eval_loader, data);
    nlohmann::json line = ev.metrics;
    line["type"] = "eval";
    line["step"] = st.step;
    line["epoch"] = static_cast<double>(st.step) / static_cast<double>(steps_per_epoch);
    metrics.write(line);
    const std::string key = "eval_" + data.primary_metric();
    bool best = false;
    if (ev.metrics.contains(key)) {
      const double v = ev.metrics[key].get<double>();
      if (v > st.best_metric || st.best_step < 0) {
        st.best_metric = v;
        st.best_eval = line;
        best = true;
      }
    }
    std::ostringstream os;
    os << "eval step " << st.step << ":";
    for (auto& [kk, v] : ev.metrics.items())
      if (kk != "eval_samples" && kk != "eval_runtime_s" && kk != "eval_samples_per_second")
        os << " " << kk << " " << std::setprecision(4) << v.get<double>();
    os << (best ? " (best)" : "");
    log.info(os.str());
    return std::make_pair(line, best);
  };

  // An evaluation that fails (bad eval data, a model limit) must not lose the training done:
  // the step's checkpoint is written first, then the error names it.
  const auto eval_or_save = [&]() {
    try {
      return run_eval();
    } catch (const Diverged&) {
      throw;
    } catch (const Error& e) {
      std::string saved;
      try {
        if (result.last_checkpoint.empty() || checkpoint_step(result.last_checkpoint) != st.step) save(false);
        saved = "; training up to step " + std::to_string(st.step) + " is saved in " + result.last_checkpoint +
                ": fix the cause and continue with --resume " + run_dir.string();
      } catch (const Error& s) {
        saved = std::string("; saving a checkpoint failed too: ") + s.what();
      }
      throw Error("evaluation at step " + std::to_string(st.step) + " failed: " + e.what() + saved);
    }
  };

  // ---- the loop ----
  module.train();
  // HOT's stochastic-rounding streams: keyed by rank too (rank 0 keeps the single-process key).
  nn::backward::run_context().seed = tc.seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(pg.rank()));
  Progress progress(total_steps, opt.progress < 0 ? ::isatty(2) != 0 : opt.progress == 1,
                    opt.quiet || !main_rank);
  int64_t loader_epoch = -1, loader_next = 0;  // where train_loader stands
  struct Window {
    double loss = 0, grad_norm = 0, step_ms = 0, fwd = 0, bwd = 0, opt = 0, wait = 0, sync = 0;
    int64_t steps = 0, examples = 0, saved_max = 0;
    double saved_sum = 0;
    double paper_flops_sum = 0, paper_saved_sum = 0;  // per example, summed over steps
  } win;
  nlohmann::json last_eval;
  bool last_was_best = false;
  int64_t steps_this_run = 0;
  double train_ms = 0;          // this process's optimizer steps (st.train_ms: the whole run's)
  int64_t train_examples = 0;
  allocator_for(device).reset_peak();

  while (st.step < total_steps) {
    bool stop = stop_requested() || (opt.interrupt_after > 0 && steps_this_run >= opt.interrupt_after);
    if (world > 1) {  // every rank stops at the same step (Ctrl-C reaches them at different times)
      std::vector<double> v{stop ? 1.0 : 0.0};
      pg.all_reduce_sum(v, "stop flag before step " + std::to_string(st.step + 1));
      stop = v[0] > 0;
    }
    if (stop) {
      result.interrupted = true;
      break;
    }
    const int64_t step = st.step;
    nn::backward::run_context().step = step;
    // Calibration (INSTANT bases, HOT's quantiser choice) on its own stream of batches.
    if (calibrator.needs_calibration(step)) {
      const auto c0 = Clock::now();
      calibrator.calibrate(
          step,
          [&](int64_t) {
            // One calibration pass sees what one optimizer step sees: k micro-batches, their
            // losses weighted as in training, so accumulation leaves the statistics unchanged.
            std::vector<data::Batch> mb(static_cast<size_t>(k));
            double examples = 0;
            for (auto& b : mb) {
              const int64_t c = st.calib_batches++;
              calib_loader->start_epoch(c / batches, c % batches);
              LB_CHECK(calib_loader->next(b), "calibration loader ran dry");
              examples += static_cast<double>(b.size());
            }
            if (world > 1) {  // shares of the global batch, as one process would weight them
              std::vector<double> v{examples};
              pg.all_reduce_sum(v, "calibration example count");
              examples = v[0];
            }
            for (auto& b : mb) {
              if (b.size() == 0) continue;  // this rank's part of a short last batch is empty
              const double share = static_cast<double>(b.size()) / examples;
              const Tensor loss = model->forward(b).loss;
              (share == 1.0 ? loss : loss * share).backward();
            }
          },
          [&] { optimizer->zero_grad(); });
      const double ms = ms_between(c0, Clock::now());
      metrics.write({{"type", "calibration"}, {"step", step}, {"ms", ms},
                     {"report", calibrator.report()["layers"]}});
      for (const auto& [layer, why] : calibrator.take_failures()) {
        progress.pause();
        log.warn("step " + std::to_string(step + 1) + ": calibration of " + layer +
                 " failed; the layer runs the vanilla (exact) backward from now on: " + why);
        metrics.write({{"type", "warning"}, {"step", step}, {"layer", layer},
                       {"message", "calibration failed; vanilla backward from now on: " + why}});
      }
    }
    if (tc.grad_probe_every > 0 && step % tc.grad_probe_every == 0) {
      const auto p0 = Clock::now();
      nlohmann::json layers = run_grad_probe(*model, module, strategies, *calib_loader, *optimizer, step);
      const double ms = ms_between(p0, Clock::now());
      st.probe_ms += ms;
      if (!layers.empty()) metrics.write({{"type", "probe"}, {"step", step}, {"ms", ms}, {"layers", layers}});
    }
    const int64_t epoch = step / steps_per_epoch;
    const int64_t first = (step % steps_per_epoch) * k;
    const int64_t last = std::min(first + k, batches);
    if (loader_epoch != epoch || loader_next != first) train_loader->start_epoch(epoch, first);
    loader_epoch = epoch;
    const auto t0 = Clock::now();
    std::vector<data::Batch> micro(static_cast<size_t>(last - first));
    int64_t step_examples = 0;
    for (auto& b : micro) {
      LB_CHECK(train_loader->next(b), "training loader ended early at epoch ", epoch);
      step_examples += b.size();
    }
    loader_next = last;
    // Data-parallel: each rank weights its micro-batches by their share of the global batch.
    double global_examples = static_cast<double>(step_examples);
    if (world > 1) {
      std::vector<double> v{global_examples};
      pg.all_reduce_sum(v, "example count of step " + std::to_string(step + 1));
      global_examples = v[0];
    }
    const auto t_data = Clock::now();
    double fwd_ms = 0, bwd_ms = 0, step_loss = 0;
    // Data-parallel: the last backward pass of the step starts the buckets' all-reduces as
    // their gradients complete (GradientSync::arm), overlapping the rest of the backward.
    size_t last_nonempty = micro.size();
    for (size_t m = 0; m < micro.size(); ++m)
      if (micro[m].size() > 0) last_nonempty = m;
    for (size_t m = 0; m < micro.size(); ++m) {
      if (micro[m].size() == 0) continue;  // this rank's part of a short last batch is empty
      const auto f0 = Clock::now();
      ModelOutput out = model->forward(micro[m]);
      const auto f1 = Clock::now();
      if (m == 0) {
        const int64_t sb = autograd::saved_bytes();
        win.saved_sum += static_cast<double>(sb);
        win.saved_max = std::max(win.saved_max, sb);
        // The papers' accounting at this batch's geometry (per example, as they report it).
        const auto paper = nn::backward::paper_totals_last_call(strategies);
        const double ex = static_cast<double>(micro[m].size());
        win.paper_flops_sum += paper.backward_flops / ex;
        win.paper_saved_sum += paper.saved_bytes_fp32 / ex;
      }
      const double l = out.loss.item_double();
      if (!std::isfinite(l))
        throw Diverged("step " + std::to_string(step + 1) + ": the training loss is " + number(l) +
                       " (micro-batch " + std::to_string(m) + ")" + last_good());
      const double share = static_cast<double>(micro[m].size()) / global_examples;
      step_loss += l * share;
      const auto f2 = Clock::now();
      if (world > 1 && m == last_nonempty) sync.arm();
      (share == 1.0 ? out.loss : out.loss * share).backward();
      const auto f3 = Clock::now();
      fwd_ms += ms_between(f0, f1);
      bwd_ms += ms_between(f2, f3);
    }
    double sync_ms = 0;
    if (world > 1) {  // the global batch's gradient and loss on every rank
      const auto s0 = Clock::now();
      sync.finish();  // what the overlap did not hide
      std::vector<double> v{step_loss};
      pg.all_reduce_sum(v, "loss of step " + std::to_string(step + 1));
      step_loss = v[0];
      sync_ms = ms_between(s0, Clock::now());
    }
    const auto o0 = Clock::now();
    const double gnorm = optim::clip_grad_norm(
        trainable, tc.max_grad_norm > 0 ? tc.max_grad_norm : std::numeric_limits<double>::infinity());
    if (!std::isfinite(gnorm)) {
      const std::string bad = first_bad_gradient(module, strategies);
      throw Diverged("step " + std::to_string(step + 1) + ": non-finite gradient norm " + number(gnorm) +
                     (bad.empty() ? std::string("") : " (first in " + bad + ")") + last_good());
    }
    optimizer->set_lr_factor(schedule.factor(step));
    const double lr = optimizer->groups().front().lr;
    optimizer->step();
    optimizer->zero_grad();
    const auto t1 = Clock::now();
    ++st.step;
    ++steps_this_run;
    result.losses.push_back(step_loss);

    win.loss += step_loss;
    win.grad_norm += gnorm;
    win.step_ms += ms_between(t0, t1);
    win.fwd += fwd_ms;
    win.bwd += bwd_ms;
    win.opt += ms_between(o0, t1);
    // The time this step spent getting its batches: collating (text) or waiting for the
    // background workers (images); wait_ms() alone counts only the latter.
    win.wait += ms_between(t0, t_data);
    win.examples += static_cast<int64_t>(global_examples);
    win.sync += sync_ms;
    train_ms += ms_between(t0, t1);
    train_examples += static_cast<int64_t>(global_examples);
    st.train_ms += ms_between(t0, t1);
    st.train_examples += static_cast<int64_t>(global_examples);
    ++st.timed_steps;
    ++win.steps;
    progress.update(st.step, step_loss, static_cast<double>(step_examples) / (ms_between(t0, t1) / 1000.0));

    if (st.step % tc.log_every == 0 || st.step == total_steps) {
      const double n = static_cast<double>(win.steps);
      const MemStats mem = allocator_for(device).stats();
      nlohmann::json peak_by_tag;
      for (int i = 0; i < kNumMemTags; ++i) peak_by_tag[mem_tag_name(static_cast<MemTag>(i))] = mem.peak[i];
      nlohmann::json line = {{"type", "train"},
                             {"step", st.step},
                             {"epoch", static_cast<double>(st.step) / static_cast<double>(steps_per_epoch)},
                             {"loss", win.loss / n},
                             {"lr", lr},
                             {"grad_norm", win.grad_norm / n},
                             {"step_ms", win.step_ms / n},
                             {"forward_ms", win.fwd / n},
                             {"backward_ms", win.bwd / n},
                             {"optimizer_ms", win.opt / n},
                             {"data_wait_ms", win.wait / n},
                             {"allreduce_ms", win.sync / n},
                             {"ranks", world},
                             {"examples_per_s", static_cast<double>(win.examples) / (win.step_ms / 1000.0)},
                             {"saved_bytes", win.saved_sum / n},
                             {"saved_bytes_max", win.saved_max},
                             {"paper_backward_mflops_per_example", win.paper_flops_sum / n / 1e6},
                             {"paper_saved_mib_fp32_per_example", win.paper_saved_sum / n / (1024.0 * 1024.0)},
                             {"peak_bytes", mem.total_peak},
                             {"peak_bytes_by_tag", peak_by_tag}};
      metrics.write(line);
      std::ostringstream os;
      os << std::fixed << "step " << st.step << "/" << total_steps << " loss " << std::setprecision(4)
         << win.loss / n << " lr " << std::scientific << std::setprecision(2) << lr << std::fixed
         << " grad_norm " << std::setprecision(3) << win.grad_norm / n << " " << std::setprecision(1)
         << win.step_ms / n << " ms/step " << line["examples_per_s"].get<double>() << " ex/s saved "
         << win.saved_sum / n / (1024.0 * 1024.0) << " MiB";
      progress.log(os.str());
      win = Window{};
      allocator_for(device).reset_peak();
    }
    const bool at_eval = st.step % eval_every == 0 || st.step == total_steps;
    if (at_eval) {
      progress.pause();
      auto [line, best] = eval_or_save();
      last_eval = line;
      last_was_best = best;
      save(best);
    } else if (tc.save_every > 0 && st.step % tc.save_every == 0) {
      save(false);
    }
  }
  progress.finish();
  if (!result.interrupted && steps_this_run == 0) {
    // Resumed at its last step: evaluate once so the results are there.
    auto [line, best] = eval_or_save();
    last_eval = line;
    (void)best;
  }
  if (result.interrupted) {
    if (result.last_checkpoint.empty() || checkpoint_step(result.last_checkpoint) != st.step) save(false);
    // The other ranks wait for rank 0's checkpoint: a launcher that sees one rank end may stop
    // the rest (mpirun does).
    if (world > 1) {
      std::vector<double> done{1.0};
      pg.all_reduce_sum(done, "checkpoint at the interruption");
    }
    log.info("interrupted at step " + std::to_string(st.step) + "; resume with --resume " +
             run_dir.string());
  } else {
    result.final_eval = last_eval;
    // Per layer: strategy, settings, ranks / quantiser choices, paper and measured figures.
    const nlohmann::json accounting = nn::backward::accounting_report(strategies);
    // Totals span the whole run, across resumes (the checkpoint carried the earlier part).
    const LoopState all = totals(st);
    nlohmann::json calibration = calibrator.report();
    calibration["calibrations"] = all.calibrations;
    calibration["ms_total"] = all.calibration_ms;
    calibration["steps"] = all.calibration_steps;
    nlohmann::json results = {{"final", last_eval}, {"best", st.best_eval},
                              {"best_checkpoint", st.best_step >= 0
                                                      ? (run_dir / ("checkpoint-" + std::to_string(st.best_step))).string()
                                                      : ""},
                              {"primary_metric", "eval_" + data.primary_metric()},
                              {"train_runtime_s", all.train_ms / 1000.0},
                              {"train_samples_per_second",
                               all.train_ms > 0 ? static_cast<double>(all.train_examples) / (all.train_ms / 1000.0)
                                                : 0.0},
                              {"minutes_per_epoch",
                               all.timed_steps > 0 ? all.train_ms / 60000.0 * static_cast<double>(steps_per_epoch) /
                                                         static_cast<double>(all.timed_steps)
                                           : 0.0},
                              {"calibration", calibration},
                              {"grad_probe_ms_total", all.probe_ms},
                              {"accounting", accounting["total"]},
                              {"layers", accounting["layers"]}};
    if (world > 1) results["data_parallel"] = {{"ranks", world}, {"backend", pg.backend()},
                                               {"allreduce_ms_total", sync.ms_total()},
                                               {"allreduce_bytes_per_step", sync.bytes_per_step()}};
    if (main_rank) io::write_text_atomic((run_dir / "eval_results.json").string(), results.dump(2) + "\n");
    (void)last_was_best;
  }
  result.steps = st.step;
  result.best_eval = st.best_eval;
  result.train_runtime_s = train_ms / 1000.0;
  result.train_samples_per_second = train_ms > 0 ? static_cast<double>(train_examples) / (train_ms / 1000.0) : 0.0;
  if (st.best_step >= 0) result.best_checkpoint = (run_dir / ("checkpoint-" + std::to_string(st.best_step))).string();
  return result;
}

}  // namespace lb::train
