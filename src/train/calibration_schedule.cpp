// The trainer's calibrations (see calibration_schedule.h).
#include "src/train/calibration_schedule.h"

#include <chrono>

#include "lb/core/error.h"

namespace lb::train {

CalibrationSchedule::CalibrationSchedule(std::vector<std::shared_ptr<nn::backward::Strategy>> strategies,
                                         TaskModel& model, TrainStep& step, data::BatchSource& loader,
                                         int64_t batches_per_epoch, int64_t grad_accum, dist::ProcessGroup* group)
    : calibrator_(strategies),
      strategies_(std::move(strategies)),
      model_(model),
      step_(step),
      loader_(loader),
      batches_(batches_per_epoch),
      grad_accum_(grad_accum) {
  calibrator_.set_group(group);
}

void CalibrationSchedule::run_if_due(int64_t step, TrainerState& st, MetricsLog& metrics, const Logger& log,
                                     Progress& progress) {
  if (!calibrator_.needs_calibration(step)) return;
  const auto c0 = std::chrono::steady_clock::now();
  progress.pause();  // the training bar, if drawn, gives the line to the calibration's
  PhaseProgress phase("calibration before step " + std::to_string(step + 1), progress.bar(), log.quiet());
  calibrator_.set_progress([&](const std::string& stage, int64_t done, int64_t total) {
    phase.update(stage, done, total);
  });
  struct Unhook {  // the hook refers to `phase`: gone with it, on an error too
    nn::backward::Calibrator& c;
    ~Unhook() { c.set_progress(nullptr); }
  } unhook{calibrator_};
  calibrator_.calibrate(
      step,
      [&](int64_t) {
        std::vector<data::Batch> mb(static_cast<size_t>(grad_accum_));
        for (auto& b : mb) {
          const int64_t c = st.calib_batches++;
          loader_.start_epoch(c / batches_, c % batches_);
          LB_CHECK(loader_.next(b), "calibration loader ran dry");
        }
        if (before_pass_) before_pass_(mb);
        step_.accumulate(micro_batches(model_, mb), "calibration example count");
      },
      [&] { step_.optimizer().zero_grad(); });
  phase.finish();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
  metrics.write({{"type", "calibration"}, {"step", step}, {"ms", ms}, {"report", calibrator_.report()["layers"]}});
  for (const auto& [layer, why] : calibrator_.take_failures()) {
    progress.pause();
    log.warn("step " + std::to_string(step + 1) + ": calibration of " + layer +
             " failed; the layer runs the vanilla (exact) backward from now on: " + why);
    metrics.write({{"type", "warning"}, {"step", step}, {"layer", layer},
                   {"message", "calibration failed; vanilla backward from now on: " + why}});
  }
  say_exact_layers(step, metrics, log);
}

void CalibrationSchedule::say_exact_layers(int64_t step, MetricsLog& metrics, const Logger& log) const {
  std::vector<std::string> exact;
  int64_t calibrated = 0;
  for (const auto& s : strategies_) {
    if (!s || !s->calibration()) continue;
    ++calibrated;
    if (!s->summary().compressing && !s->record().fell_back) exact.push_back(s->record().name);
  }
  if (exact.empty()) return;
  std::string names;
  for (size_t i = 0; i < exact.size() && i < 4; ++i) names += (i ? ", " : "") + exact[i];
  if (exact.size() > 4) names += ", ...";
  log.info("calibration before step " + std::to_string(step + 1) + ": " + std::to_string(exact.size()) + " of " +
           std::to_string(calibrated) + " calibrated layers keep the exact backward at their shape (no gain there: "
           "compressed, they would keep more bytes than exact, or cost more FLOPs without halving them): " + names);
  metrics.write({{"type", "exact_layers"}, {"step", step}, {"layers", exact}, {"calibrated", calibrated}});
}

}  // namespace lb::train
