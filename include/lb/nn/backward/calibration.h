// Driving calibration of backward strategies (INSTANT's bases, any strategy that asks) from a
// training loop. Build a Calibrator from the strategies Policy::apply returned.
//
// The contract, at every optimizer step `step` (0-based, counted in optimizer steps, not
// per-epoch batch indices), before that step's forward:
//
//   if (cal.needs_calibration(step)) {
//     cal.begin(step);                              // exact mode + statistics on for those layers
//     for (int64_t i = 0; i < cal.num_batches(); ++i) {
//       Tensor loss = loss_fn(model(calib_batch(i)));   // N_c extra batches, from a separate
//       loss.backward();                                // shuffled stream of training data
//     }                                                 // (model in train mode)
//     cal.finish();                                 // eigendecompositions, new bases installed
//     zero all parameter gradients                  // the calibration backward filled .grad
//   }
//   forward, backward, optimizer step as usual
//
// Rules: no optimizer step between begin() and finish() (calibration batches train nothing);
// gradients zeroed after finish() (unlike the NLP reference code, which leaks them into the
// next step); no forward whose backward is still pending across begin()/finish() (the bases
// change at finish(); a stale saved state fails loudly in backward). calibrate() below does
// begin / passes / finish / zero_grad in that order.
//
// Layers that do not need calibration at `step` keep running their normal strategy during the
// passes. A layer whose backward no pass reached (a frozen layer reading frozen inputs: nothing
// asks for its g_x) stays uncalibrated but idle: it starts no calibration of its own (it would
// ask for one before every step), it joins those the others start. (Not checkpointed: a
// resumed run finds it idle again after its first calibration.) The cost (wall time of the
// whole calibration, passes included) is reported apart from training time by report() and
// by each strategy's report()["calibration"].
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/dist/process_group.h"
#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

class Calibrator {
 public:
  explicit Calibrator(std::vector<std::shared_ptr<Strategy>> strategies);

  // Data-parallel training: finish() first sums each calibrating strategy's statistics over
  // the group's ranks (Calibratable::reduce_calibration), so every rank computes the state one
  // process would from the global batches, then gives every rank rank 0's resulting state
  // (decisions such as HOT's quantiser choice are rank 0's). nullptr: one process.
  void set_group(dist::ProcessGroup* group) { group_ = group; }

  // Whether any strategy wants calibration before optimizer step `step`.
  bool needs_calibration(int64_t step) const;
  // Passes to run for the calibration begun last (the largest N_c among its layers); before
  // begin(), for `step`.
  int64_t num_batches() const { return num_batches_; }
  int64_t num_batches(int64_t step) const;
  // Puts the strategies that need calibration at `step` in calibration mode.
  void begin(int64_t step);
  // Ends calibration: every strategy in calibration mode computes its new state.
  void finish();
  bool active() const { return !active_.empty(); }

  // The whole protocol: begin(step); run_batch(i) for i < num_batches() (each one forward and
  // backward, no optimizer step); finish(); zero_grad(). Returns false (doing nothing) when no
  // strategy needs calibration at `step`.
  bool calibrate(int64_t step, const std::function<void(int64_t)>& run_batch,
                 const std::function<void()>& zero_grad);

  // Hears how far a calibration is: (stage, done, total) after each pass ("batches") and
  // each layer's new state ("layers": the eigendecompositions, often the longer part).
  using ProgressFn = std::function<void(const std::string& stage, int64_t done, int64_t total)>;
  void set_progress(ProgressFn f) { progress_ = std::move(f); }

  // {"calibrations", "ms_total", "steps": [...], "layers": [...]}: for every layer that took
  // part, its ranks (INSTANT) and calibration cost.
  nlohmann::json report() const;

  // Layers whose calibration failed (lb::Error from finishing it) since the last call, as
  // (layer, message). Such a layer falls back to the exact backward for the rest of the run
  // (Strategy::fall_back_to_exact) and is not calibrated again; the others are unaffected.
  std::vector<std::pair<std::string, std::string>> take_failures();

 private:
  std::vector<std::shared_ptr<Strategy>> all_;
  dist::ProcessGroup* group_ = nullptr;
  std::vector<std::shared_ptr<Strategy>> active_;
  std::vector<bool> calibrated_;  // per strategy in all_: took part in a calibration
  int64_t num_batches_ = 0;
  int64_t calibrations_ = 0;
  double ms_total_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::vector<int64_t> steps_;
  std::vector<std::pair<std::string, std::string>> failures_;
  ProgressFn progress_;
};

}  // namespace lb::nn::backward
