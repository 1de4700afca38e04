// The part of a backward strategy that calibrates: statistics gathered over extra
// forward/backward passes between optimizer steps, then a new state computed from them
// (INSTANT's bases; HOT's LQS choice). Strategies that calibrate implement it and return
// themselves from Strategy::calibration(); the Calibrator (calibration.h) drives it.
#pragma once
#include <cstdint>

#include "lb/core/tensor.h"
#include "lb/dist/process_group.h"
#include "lb/nn/backward/context.h"

namespace lb::nn::backward {

class Calibratable {
 public:
  virtual ~Calibratable() = default;

  // Whether this layer wants calibration before optimizer step `step`.
  virtual bool needs_calibration(int64_t step) const = 0;
  // Forward/backward passes the loop should run when it does (INSTANT's N_c; one pass for a
  // strategy that only inspects a first batch, like HOT's LQS).
  virtual int64_t calibration_batches() const { return 1; }

  // Text batches padded to their own longest example (data.padding "dynamic") have different
  // token counts L; the training loop gives the most any batch can have. State sized by L
  // (INSTANT's token-axis bases) is sized by this instead. 0: fixed L.
  virtual void set_max_tokens(int64_t /*max_L*/) {}

  // Data-parallel calibration (Calibrator::set_group): before the pass ends, sums this rank's
  // statistics with the other ranks', so the new state follows from the global batches. A
  // strategy whose new state follows from the summed statistics alone returns true from
  // reduces_calibration() (every rank then computes the same state); the others get rank 0's
  // state after finishing.
  virtual void reduce_calibration(dist::ProcessGroup& /*group*/) {}
  virtual bool reduces_calibration() const { return false; }

  // The pass (Strategy::begin_calibration / finish_calibration call these): statistics reset,
  // one call's input and output gradient observed (`sequences`: a padding-free call's, null
  // otherwise; `step`: the key of the call's forward), the new state computed. Throwing from
  // on_calibration_end makes the layer fall back to the exact backward.
  virtual void on_calibration_begin() {}
  virtual void observe_input(const Tensor& /*x*/, const SequenceOffsets& /*sequences*/) {}
  virtual void observe_grad_output(const Tensor& /*g_y*/, const SequenceOffsets& /*sequences*/,
                                   const StepContext& /*step*/) {}
  virtual void on_calibration_end() = 0;
};

}  // namespace lb::nn::backward
