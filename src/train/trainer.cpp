// The training loop (see trainer.h): a composition of the run's parts (training_setup.h,
// run_directory.h, resume.h, calibration_schedule.h, train_step.h, step_log.h, eval_step.h,
// data_parallel.h).
#include "lb/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>

#include "lb/autograd/peak_watch.h"
#include "lb/core/precision.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"
#include "lb/nn/backward/accounting.h"
#include "lb/nn/backward/calibration.h"
#include "lb/train/report/grad_probe.h"
#include "lb/train/export/hf_export.h"
#include "lb/train/memory/memory_planner.h"
#include "lb/train/run/metrics_log.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/run/progress.h"
#include "lb/train/run/run_info.h"
#include "src/train/memory/budgeted_run.h"
#include "src/train/calibration_schedule.h"
#include "src/train/data_parallel.h"
#include "src/train/eval_step.h"
#include "src/train/run/resume.h"
#include "src/train/run/run_directory.h"
#include "src/train/run/step_log.h"
#include "src/train/run/trainer_state.h"
#include "src/train/training_setup.h"

namespace lb::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The run's first metrics line: what was run, on what, from which source.
nlohmann::json run_line(const Config& config, const TrainingSetup& s, const std::string& strategy) {
  nn::Module& module = s.model->module();
  return {{"type", "run"},
          {"config", config.to_json()},
          {"model", s.model->model_config()},
          {"parameters", module.num_parameters()},
          {"trainable_parameters", module.num_parameters(true)},
          {"train_examples", s.data.train_size()},
          {"eval_examples", s.data.eval_size()},
          {"eval_split", s.data.eval_split},
          {"steps", s.total_steps},
          {"steps_per_epoch", s.steps_per_epoch},
          {"strategy_override", strategy},
          {"environment", environment_json()},
          {"git_commit", git_commit()},
          {"plan", s.plan.to_json()},
          {"load_report", s.load_log}};
}

// eval_results.json: the final and best evaluations, the whole run's throughput, calibration
// and probe totals (`all`: across resumes), and per layer its strategy's accounting.
nlohmann::json results_json(const TrainingSetup& s, const TrainerState& all, const nlohmann::json& last_eval,
                            nlohmann::json calibration, const std::string& best_checkpoint) {
  const nlohmann::json accounting = nn::backward::accounting_report(s.strategies);
  calibration["calibrations"] = all.calibrations;
  calibration["ms_total"] = all.calibration_ms;
  calibration["steps"] = all.calibration_steps;
  return {{"final", last_eval},
          {"best", all.best_eval},
          {"best_checkpoint", best_checkpoint},
          {"stopped_early_at_step", all.stopped_early ? nlohmann::json(all.step) : nlohmann::json()},
          {"primary_metric", "eval_" + s.data.primary_metric()},
          {"train_runtime_s", all.train_ms / 1000.0},
          {"train_samples_per_second",
           all.train_ms > 0 ? static_cast<double>(all.train_examples) / (all.train_ms / 1000.0) : 0.0},
          {"minutes_per_epoch", all.timed_steps > 0 ? all.train_ms / 60000.0 * static_cast<double>(s.steps_per_epoch) /
                                                          static_cast<double>(all.timed_steps)
                                                    : 0.0},
          {"calibration", calibration},
          {"grad_probe_ms_total", all.probe_ms},
          {"accounting", accounting["total"]},
          {"layers", accounting["layers"]}};
}

// The log lines that open a run.
void log_start(const Logger& log, const Config& config, const TrainingSetup& s, const RunDirectory& dir,
               const std::string& resume_ckpt, dist::ProcessGroup& pg, const GradientSync& sync, bool print_plan,
               const Device& device) {
  log.info("run directory " + dir.path().string() +
           (resume_ckpt.empty() ? "" : " (resuming from " + resume_ckpt + ")"));
  if (!s.load_log.empty()) log.info(s.load_log);
  log.info(std::to_string(s.data.train_size()) + " training examples, " + std::to_string(s.data.eval_size()) +
           " for evaluation (" + s.data.eval_split + "); " + std::to_string(s.total_steps) + " steps (" +
           std::to_string(s.steps_per_epoch) + " per epoch, batch " + std::to_string(config.data.batch_size) +
           " x " + std::to_string(config.train.grad_accum) + " accumulated); " +
           std::to_string(s.model->module().num_parameters(true)) + " trainable parameters");
  if (print_plan) log.block(s.plan.table());
  if (pg.size() > 1)
    log.info("data-parallel: " + std::to_string(pg.size()) + " ranks (" + pg.backend() + "), batch " +
             std::to_string(config.data.batch_size) + " per rank, " +
             std::to_string(config.data.batch_size * pg.size()) + " in all; gradients summed in " +
             std::to_string(sync.buckets()) + " bucket(s) of " + std::to_string(sync.bytes_per_step() / 1024) +
             " KiB in all per step");
  if (config.train.precision == "bf16") log.info("precision bf16: products on " + bf16_products_note());
  const bool hot = std::any_of(s.strategies.begin(), s.strategies.end(),
                               [](const auto& st) { return st && st->type() == "hot"; });
  if (hot && !device.is_cuda())
    if (const std::string w = hot_kernel_warning(); !w.empty()) log.warn(w);
}

// What `leanback export` needs besides the weights, kept with every checkpoint.
TaskLabels task_labels(const TrainingSetup& s) {
  TaskLabels t;
  t.names = s.data.glue ? s.data.glue->class_names : s.data.label_names;
  t.num_labels = s.data.num_labels;
  t.regression = s.data.regression;
  return t;
}

// The gradient-fidelity probe of `step` (train.grad_probe_every), timed into the run's totals.
void probe(TaskModel& model, TrainStep& train_step, const TrainingSetup& s, int64_t step, TrainerState& st,
           MetricsLog& metrics) {
  const auto p0 = Clock::now();
  nlohmann::json layers = run_grad_probe(model, train_step, s.strategies, *s.calib_loader, step);
  const double ms = ms_between(p0, Clock::now());
  st.probe_ms += ms;
  if (!layers.empty()) metrics.write({{"type", "probe"}, {"step", step}, {"ms", ms}, {"layers", layers}});
}

// The micro-batches of each optimizer step: step s of an epoch takes its micro-batches
// [j·k, (j+1)·k) (trainer.h); the loader is moved only where the run jumps (a resume).
class StepBatches {
 public:
  StepBatches(data::BatchSource& loader, int64_t steps_per_epoch, int64_t grad_accum, int64_t batches)
      : loader_(loader), steps_per_epoch_(steps_per_epoch), grad_accum_(grad_accum), batches_(batches) {}
  std::vector<data::Batch> of_step(int64_t step) {
    const int64_t epoch = step / steps_per_epoch_;
    const int64_t first = (step % steps_per_epoch_) * grad_accum_;
    const int64_t last = std::min(first + grad_accum_, batches_);
    if (epoch_ != epoch || next_ != first) loader_.start_epoch(epoch, first);
    epoch_ = epoch;
    std::vector<data::Batch> micro(static_cast<size_t>(last - first));
    examples_ = 0;
    for (auto& b : micro) {
      LB_CHECK(loader_.next(b), "training loader ended early at epoch ", epoch);
      examples_ += b.size();
    }
    next_ = last;
    return micro;
  }
  int64_t examples() const { return examples_; }  // of the last step's batches

 private:
  data::BatchSource& loader_;
  int64_t steps_per_epoch_, grad_accum_, batches_;
  int64_t epoch_ = -1, next_ = 0, examples_ = 0;  // where the loader stands
};

// The end of a finished run: eval_results.json (totals across resumes: the checkpoint carried
// the earlier part) and, with output.export, the export of its best checkpoint (rank 0).
void finish_run(const Config& config, const TrainingSetup& s, const TrainerState& st, const nlohmann::json& last_eval,
                const nlohmann::json& calibration, const nlohmann::json& memory, const GradientSync& sync,
                dist::ProcessGroup& pg, const RunDirectory& dir, const Logger& log) {
  nlohmann::json results = results_json(s, st.with_calibrations(calibration), last_eval, calibration,
                                        st.best_step >= 0 ? dir.checkpoint_path(st.best_step).string() : "");
  results["memory"] = memory;  // the whole step's, this process's part of the run
  if (pg.size() > 1)
    results["data_parallel"] = {{"ranks", pg.size()}, {"backend", pg.backend()},
                                {"allreduce_ms_total", sync.ms_total()},
                                {"allreduce_bytes_per_step", sync.bytes_per_step()}};
  dir.write_file("eval_results.json", results.dump(2) + "\n");
  if (!pg.is_main() || !config.output.export_model) return;
  record_written(dir.path(), {"export"});
  ExportOptions eo;
  eo.merge = config.output.export_merged;
  eo.overwrite = true;  // <run>/export is this run's own (a resumed run exports again)
  // The best checkpoint by the task's metric (the newest where no evaluation chose one).
  const std::string best = st.best_step >= 0 ? dir.checkpoint_path(st.best_step).string() : dir.last_checkpoint();
  const ExportSummary ex = export_checkpoint(best, dir.path() / "export", eo, "output.export");
  log.info("exported " + ex.checkpoint + " (" + ex.format + ") to " + (dir.path() / "export").string());
}

// The config as the caller asked for it: the run override of train.seed applied.
Config with_seed(Config config, std::optional<uint64_t> seed) {
  if (seed) config.train.seed = *seed;
  return config;
}

}  // namespace

TrainResult train(const Config& config_in, const TrainOptions& opt) {
  const Config requested = with_seed(config_in, opt.seed);
  TrainResult result;
  // Data-parallel: every rank runs this function; rank 0 alone writes files and logs.
  const Ranks ranks = join_ranks(opt.group, opt.device);
  dist::ProcessGroup& pg = *ranks.group;
  const bool main_rank = pg.is_main();
  check_export_setting(requested);  // before the run directory exists: nothing written for a run that cannot finish
  const std::string resume_ckpt = opt.resume.empty() ? "" : find_checkpoint(opt.resume);
  RunDirectory dir(resolve_run_dir(requested, opt), resume_ckpt, opt.overwrite, pg);
  result.run_dir = dir.path().string();
  BudgetedRun budget(requested, opt, dir.path(), !resume_ckpt.empty(), pg);
  const Config config = resolved_for_training(budget.config());  // the plan's settings, "auto"s: once
  const TrainSection& tc = config.train;
  // Everything is built and validated before any training work; only then is an old run
  // (with --overwrite) cleared, and only of the files leanback wrote there.
  TrainingSetup s = set_up_training(config, opt.strategy, ranks.device, pg);
  nn::Module& module = s.model->module();
  dir.prepare(opt.quiet);
  TrainerState st;
  if (!resume_ckpt.empty())
    st = resume_run(resume_ckpt, module, *s.optimizer, s.schedule, config, s.total_steps, dir.path(), main_rank);
  // config.json: every default filled in, the backward strategies' settings included.
  nlohmann::json resolved = config.to_json();
  resolved["backward"] = config.backward.resolved_json();
  dir.write_run_files(resolved, s.plan.table() + budget.table(), budget.json());
  MetricsLog metrics((dir.path() / "metrics.jsonl").string(), main_rank, st.step);
  const TrainStepOptions step_options = train_step_options(config, s, pg, ranks.device, st.last_grad_norm);
  TrainStep train_step(module, *s.optimizer, step_options);
  budget.attach(module, train_step, step_options.codecs);
  // Same starting weights on every rank (they are initialised alike, and a resumed run loaded
  // the same checkpoint; the broadcast makes it so bitwise).
  GradientSync sync(pg, train_step.trainable(),
                    std::max<int64_t>(1, static_cast<int64_t>(tc.bucket_cap_mb * 1024.0 * 1024.0)));
  if (pg.size() > 1) sync.broadcast_parameters();
  train_step.set_gradient_sync(&sync);
  if (resume_ckpt.empty()) metrics.write(run_line(config, s, opt.strategy));
  const Logger log(opt.quiet || !main_rank);
  log_start(log, config, s, dir, resume_ckpt, pg, sync, !opt.quiet && main_rank, ranks.device);
  // Mixed precision for every product of this run (training, calibration, evaluation).
  const MatmulPrecisionScope precision(matmul_precision_from_name(tc.precision));
  CalibrationSchedule calibration(s.strategies, *s.model, train_step, *s.calib_loader, s.batches, tc.grad_accum,
                                  pg.size() > 1 ? &pg : nullptr);
  // A calibration pass runs the plan for its own batches' length, not the last step's.
  calibration.set_before_pass([&](const std::vector<data::Batch>& mb) { budget.put_in_force_for(mb); });
  const nlohmann::json checkpoint_extra = {{"config", config.to_json()},
                                           {"strategy_override", opt.strategy},
                                           {"model", s.model->model_config()},
                                           {"task", task_labels(s).to_json()}};
  const auto save = [&](bool is_best) {
    dir.save(st, is_best, module, *s.optimizer, s.schedule, checkpoint_extra, calibration.report(),
             tc.keep_checkpoints, log);
  };
  const auto saved_now = [&] {
    return !dir.last_checkpoint().empty() && checkpoint_step(dir.last_checkpoint()) == st.step;
  };
  Progress progress(s.total_steps, opt.progress < 0 ? ::isatty(2) != 0 : opt.progress == 1, opt.quiet || !main_rank);
  // Rank 0 evaluates. An evaluation that fails (bad eval data, a model limit) must not lose
  // the training done: the step's checkpoint is written first, then the error names it.
  const auto evaluate_now = [&]() -> EvalAtStep {
    if (!main_rank) return {};
    try {
      if (opt.before_eval) opt.before_eval(st.step);
      return evaluate_at_step(*s.model, *s.eval_loader, s.data, s.steps_per_epoch, st, metrics, log, progress.bar(),
                              tc.early_stopping_patience);
    } catch (const Diverged&) {
      throw;
    } catch (const Error& e) {
      std::string saved;
      try {
        if (!saved_now()) save(false);
        saved = "; training up to step " + std::to_string(st.step) + " is saved in " + dir.last_checkpoint() +
                ": fix the cause and continue with --resume " + dir.path().string();
      } catch (const Error& s) {
        saved = std::string("; saving a checkpoint failed too: ") + s.what();
      }
      throw Error("evaluation at step " + std::to_string(st.step) + " failed: " + e.what() + saved);
    }
  };

  // ---- the loop ----
  module.train();
  StepLog step_log(s.total_steps, s.steps_per_epoch, pg.size(), ranks.device);
  StepBatches batches(*s.train_loader, s.steps_per_epoch, tc.grad_accum, s.batches);
  nlohmann::json last_eval;
  int64_t steps_this_run = 0;
  double train_ms = 0;  // this process's optimizer steps (st.train_ms: the whole run's)
  int64_t train_examples = 0;
  while (st.step < s.total_steps && !on_any_rank(pg, st.stopped_early, "early stopping")) {
    const bool stop = stop_requested() || (opt.interrupt_after > 0 && steps_this_run >= opt.interrupt_after);
    if (on_any_rank(pg, stop, "stop flag before step " + std::to_string(st.step + 1))) {
      result.interrupted = true;
      break;
    }
    const int64_t step = st.step;
    train_step.begin_step(step);
    calibration.run_if_due(step, st, metrics, log, progress);
    if (tc.grad_probe_every > 0 && step % tc.grad_probe_every == 0) probe(*s.model, train_step, s, step, st, metrics);
    const auto t0 = Clock::now();
    const std::vector<data::Batch> micro = batches.of_step(step);
    const auto t_data = Clock::now();
    budget.begin_step(micro, ranks.device);
    StepResult r;
    try {
      r = train_step.run(step, micro_batches(*s.model, micro), /*measure_saved=*/true);
    } catch (const Diverged& e) {
      throw Diverged(e.what() + dir.last_good_note());
    }
    budget.end_step(step, r, config.source, dir.last_good_note());
    const double step_ms = ms_between(t0, Clock::now());
    ++st.step;
    st.last_grad_norm = r.grad_norm;
    ++steps_this_run;
    result.losses.push_back(r.loss);
    step_log.add(r, step_ms, ms_between(t0, t_data));
    train_ms += step_ms;
    train_examples += r.examples;
    st.add_timed_step(step_ms, r.examples);
    progress.update(st.step, r.loss, static_cast<double>(batches.examples()) / (step_ms / 1000.0));
    if (st.step % tc.log_every == 0 || st.step == s.total_steps) step_log.flush(st.step, metrics, progress);
    if (st.step % s.eval_every == 0 || st.step == s.total_steps) {
      progress.pause();
      const EvalAtStep ev = evaluate_now();
      last_eval = ev.line;
      save(ev.best);
    } else if (tc.save_every > 0 && st.step % tc.save_every == 0) {
      save(false);
    }
  }
  progress.finish();
  if (!result.interrupted && steps_this_run == 0) last_eval = evaluate_now().line;  // resumed at its last step
  if (result.interrupted) {
    if (!saved_now()) save(false);
    // The other ranks wait for rank 0's checkpoint: a launcher that sees one rank end may stop
    // the rest (mpirun does).
    if (pg.size() > 1) on_any_rank(pg, true, "checkpoint at the interruption");
    log.info("interrupted at step " + std::to_string(st.step) + "; resume with --resume " + dir.path().string());
  } else {
    result.final_eval = last_eval;
    finish_run(config, s, st, last_eval, calibration.report(), step_log.memory_summary(), sync, pg, dir, log);
  }
  budget.report(log, metrics, result);
  result.steps = st.step;
  result.best_eval = st.best_eval;
  result.last_checkpoint = dir.last_checkpoint();
  result.train_runtime_s = train_ms / 1000.0;
  result.train_samples_per_second = train_ms > 0 ? static_cast<double>(train_examples) / (train_ms / 1000.0) : 0.0;
  if (st.best_step >= 0) result.best_checkpoint = dir.checkpoint_path(st.best_step).string();
  return result;
}

}  // namespace lb::train
