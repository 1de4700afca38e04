// What the training loop, reports and checkpoints know of one layer's backward strategy,
// apart from the strategy's maths: which layer it serves, the mode it runs in (calibrating,
// idle, fallen back to exact, on a frozen weight), the step its random draws are keyed by,
// and what its calls measured. Strategy holds one (Strategy::record()) and keeps it up to
// date in its public entries; a strategy's author reads it (record_.step(), ...) and need
// not write to it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "lb/nn/backward/context.h"

namespace lb::nn::backward {

struct LayerGeometry {
  int64_t B = 0, L = 0, I = 0, O = 0;
  // A padding-free call (CallContext::sequences): B = 1 and its L tokens are `sequences`
  // sequences back to back, the longest of them `longest` tokens. 0: not packed.
  int64_t sequences = 0, longest = 0;
  // Elements per sample the exact backward keeps: 0 means L·I (the token view, a Linear's
  // x); a convolution keeps its image, C·H·W, k² times less than its im2col tokens.
  int64_t exact_saved = 0;
};

struct LayerRecord {
  // ---- identity: reports, and the key of the layer's random streams ----
  std::string name;
  int64_t id = 0;
  bool conv = false;  // a Conv2d layer (else a Linear)

  // ---- mode ----
  bool calibrating = false;  // between begin_calibration() and finish_calibration()
  // A layer whose last calibration pass never reached its backward (nothing asked for its
  // g_x) stays uncalibrated yet has nothing to calibrate for: it must not start a calibration
  // of its own (one pass before every step), it joins the ones others start (the Calibrator
  // sets this).
  bool calibration_idle = false;
  // After a failed calibration (the eigendecomposition did not converge, or saw NaN) the
  // layer runs the exact backward for the rest of the run; `fallback_reason` says why.
  bool fell_back = false;
  std::string fallback_reason;
  bool frozen = false;  // its calls so far were on a frozen weight (Strategy::save_frozen)

  // The step whose random streams this layer's calls draw from (shared by the training loop
  // with every layer). Unset: seed 0, step 0, the training stream.
  std::shared_ptr<const StepContext> step_context;
  const StepContext& step() const;

  // ---- measured ----
  // Backward calls and milliseconds; calls made while calibrating are counted apart (they
  // are calibration cost). The geometry of the last call that saved for backward and the
  // bytes it kept. A decorator that runs calls through a strategy on its own account (the
  // probe) puts these back afterwards.
  struct Measured {
    int64_t calls = 0;
    double backward_ms = 0;
    int64_t calib_calls = 0;
    double calib_backward_ms = 0;
    LayerGeometry last_geom;
    int64_t last_saved_bytes = 0;
  };
  Measured measured;
  int64_t calib_calls_at_begin = 0;

  void fall_back_to_exact(const std::string& why) {
    fell_back = true;
    fallback_reason = why;
  }
  // Backward calls since the calibration began (0: the pass never reached this layer).
  int64_t calibration_pass_calls() const { return measured.calib_calls - calib_calls_at_begin; }
  void count_backward(double ms) {
    if (calibrating) {
      ++measured.calib_calls;
      measured.calib_backward_ms += ms;
    } else {
      ++measured.calls;
      measured.backward_ms += ms;
    }
  }
};

}  // namespace lb::nn::backward
