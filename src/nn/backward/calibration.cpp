// Calibrator: which strategies calibrate at a step, and the begin / passes / finish protocol
// (see calibration.h).
#include "lb/nn/backward/calibration.h"

#include <algorithm>

#include "lb/core/error.h"

namespace lb::nn::backward {

Calibrator::Calibrator(std::vector<std::shared_ptr<Strategy>> strategies)
    : all_(std::move(strategies)), calibrated_(all_.size(), false) {
  for (const auto& s : all_) LB_CHECK(s != nullptr, "Calibrator: null strategy");
}

bool Calibrator::needs_calibration(int64_t step) const { return num_batches(step) > 0; }

namespace {
// The strategy's calibration side when it wants a pass before `step` (null otherwise).
const Calibratable* wants_calibration(const Strategy& s, int64_t step) {
  const Calibratable* c = s.calibration();
  return c && !s.record().fell_back && c->needs_calibration(step) ? c : nullptr;
}
}  // namespace

// Only layers that are not idle start a calibration; idle ones join it (begin()).
int64_t Calibrator::num_batches(int64_t step) const {
  int64_t n = 0;
  for (const auto& s : all_)
    if (const Calibratable* c = wants_calibration(*s, step); c && !s->record().calibration_idle)
      n = std::max<int64_t>(n, std::max<int64_t>(1, c->calibration_batches()));
  return n;
}

void Calibrator::begin(int64_t step) {
  LB_CHECK(active_.empty(), "Calibrator::begin(", step, "): a calibration is already running; call finish() first");
  num_batches_ = num_batches(step);
  for (size_t i = 0; i < all_.size(); ++i)
    if (wants_calibration(*all_[i], step)) {
      all_[i]->begin_calibration();
      active_.push_back(all_[i]);
      calibrated_[i] = true;
    }
  started_ = std::chrono::steady_clock::now();
  steps_.push_back(step);
}

void Calibrator::finish() {
  const bool dp = group_ && group_->size() > 1;
  // Which layers' backward the passes reached, on any rank (so that every rank agrees on
  // which layers start the next calibration).
  std::vector<double> reached;
  for (const auto& s : active_) reached.push_back(static_cast<double>(s->record().calibration_pass_calls()));
  if (dp && !reached.empty()) group_->all_reduce_sum(reached, "calibration backward calls");
  for (size_t i = 0; i < active_.size(); ++i) active_[i]->record().calibration_idle = reached[i] == 0;
  for (size_t k = 0; k < active_.size(); ++k) {
    const auto& s = active_[k];
    if (progress_) progress_("layers", static_cast<int64_t>(k), static_cast<int64_t>(active_.size()));
    try {
      if (dp) s->calibration()->reduce_calibration(*group_);
      s->finish_calibration();
    } catch (const Error& e) {
      s->record().fall_back_to_exact(e.what());
      failures_.emplace_back(s->record().name, e.what());
    }
    if (dp && !s->calibration()->reduces_calibration()) {  // rank 0's state everywhere (e.g. HOT's choice)
      std::string state = group_->is_main() ? s->state_json().dump() : std::string();
      group_->broadcast(state, 0, "calibrated state of " + s->record().name);
      if (!group_->is_main()) s->load_state_json(nlohmann::json::parse(state));
    }
  }
  if (progress_) progress_("layers", static_cast<int64_t>(active_.size()), static_cast<int64_t>(active_.size()));
  active_.clear();
  ++calibrations_;
  ms_total_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count();
}

bool Calibrator::calibrate(int64_t step, const std::function<void(int64_t)>& run_batch,
                           const std::function<void()>& zero_grad) {
  if (!needs_calibration(step)) return false;
  begin(step);
  try {
    for (int64_t i = 0; i < num_batches_; ++i) {
      run_batch(i);
      if (progress_) progress_("batches", i + 1, num_batches_);
    }
  } catch (...) {
    finish();  // leave no layer in calibration mode; statistics seen so far are still valid
    if (zero_grad) zero_grad();
    throw;
  }
  finish();
  if (zero_grad) zero_grad();
  return true;
}

nlohmann::json Calibrator::report() const {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < all_.size(); ++i) {
    if (!calibrated_[i]) continue;
    const auto& s = all_[i];
    const StrategySummary sum = s->summary();
    nlohmann::json l = {{"layer", sum.layer}, {"type", sum.type}};
    if (sum.ranks) {
      l["x"] = sum.ranks->x.to_json();
      l["g_y"] = sum.ranks->g_y.to_json();
    }
    if (sum.quantizer) l["quantizer"] = *sum.quantizer;
    if (sum.calibration) l["cost"] = sum.calibration_json();
    layers.push_back(l);
  }
  return {{"calibrations", calibrations_}, {"ms_total", ms_total_}, {"steps", steps_}, {"layers", layers}};
}

std::vector<std::pair<std::string, std::string>> Calibrator::take_failures() {
  std::vector<std::pair<std::string, std::string>> out;
  out.swap(failures_);
  return out;
}

}  // namespace lb::nn::backward
