// The training loop's saved state (see trainer_state.h).
#include "src/train/run/trainer_state.h"

#include <cmath>

#include "lb/core/error.h"
#include "lb/io/json_file.h"

namespace lb::train {

nlohmann::json TrainerState::to_json() const {
  return {{"step", step},           {"calib_batches", calib_batches},
          {"best_metric", std::isfinite(best_metric) ? nlohmann::json(best_metric) : nlohmann::json()},
          {"best_step", best_step}, {"checkpoints", checkpoints},
          {"evals_since_best", evals_since_best}, {"stopped_early", stopped_early},
          {"last_grad_norm", last_grad_norm},
          {"best_eval", best_eval}, {"train_ms", train_ms},
          {"train_examples", train_examples}, {"timed_steps", timed_steps}, {"probe_ms", probe_ms},
          {"calibrations", calibrations}, {"calibration_ms", calibration_ms},
          {"calibration_steps", calibration_steps}};
}

void TrainerState::from_json(const nlohmann::json& j, const std::string& where) {
  try {
    const std::string at = where + ": extra.trainer";
    step = io::json_int(j, "step", 0, INT64_MAX, at);
    calib_batches = io::json_int(j, "calib_batches", 0, INT64_MAX, at);
    best_metric = j.contains("best_metric") && j.at("best_metric").is_null()
                      ? -std::numeric_limits<double>::infinity()
                      : io::json_number(j, "best_metric", at);
    best_step = io::json_int(j, "best_step", -1, INT64_MAX, at);
    // Early stopping's counters: absent from checkpoints written before it existed.
    if (j.contains("evals_since_best")) evals_since_best = io::json_int(j, "evals_since_best", 0, INT64_MAX, at);
    if (j.contains("last_grad_norm")) last_grad_norm = io::json_number(j, "last_grad_norm", at);
    if (j.contains("stopped_early")) {
      LB_CHECK(j.at("stopped_early").is_boolean(), at, ".stopped_early: expected true or false");
      stopped_early = j.at("stopped_early").get<bool>();
    }
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

TrainerState TrainerState::with_calibrations(const nlohmann::json& cal) const {
  TrainerState t = *this;
  t.calibrations += cal["calibrations"].get<int64_t>();
  t.calibration_ms += cal["ms_total"].get<double>();
  for (const auto& s : cal["steps"]) t.calibration_steps.push_back(s.get<int64_t>());
  return t;
}

}  // namespace lb::train
