// Internal: the memory planner's profiles on small batches, extrapolated to the config's
// batch. A step's bytes are affine in the number of examples: what every example keeps
// (activations, their codes, their in-flight temporaries) grows with it, what the step holds
// once (weights' gradients as temporaries, GEMM workspace, a layer's projection basis) does
// not. So the planner profiles each option on two small batches of the config's shape (2 and
// 4 examples; real tokens in the same share) and extends the line through them to the
// config's batch: every kept tensor's bytes, the bytes kept at the peak. A peak is the
// largest of such lines over the step's moments, so it is scaled from the larger profile in
// proportion to the batch, which never under-reads it (the .cpp says why); so is the step's
// time, timed on the larger profile only. A
// plan chosen from these is then measured once on the full batch (the plan's
// "measured" peak), and re-solved if that is over the budget, so the extrapolation is
// checked where it matters; tests/train/scaled_profile_test.cpp compares it with full-batch
// profiles. Small profiles run ~8 times faster on a 32-example batch and hold a fraction
// of its activations.
#pragma once
#include <cstdint>
#include <string>

#include "lb/train/config.h"
#include "lb/train/memory/memory_report.h"

namespace lb::train::planning {

// The two batch sizes profiled for `config` (small < large), or {0, 0}: its batch is too small
// to gain by it (fewer than 8 examples), so it is profiled as it is.
struct ProfileBatches {
  int64_t small = 0, large = 0;
  bool scaled() const { return large > 0; }
};
ProfileBatches profile_batches(const Config& config);

// memory_report(config, strategy, timed_steps, real_tokens), from two small batches where
// profile_batches scales (then `examples` is the config's batch and `timed` empty), else
// measured as it is. Never asks for the steady step (the planner measures the whole step
// apart). `run_peak_bytes`: the larger of the two profiles' (what the planner held).
MemoryReport scaled_memory_report(const Config& config, const std::string& strategy, int timed_steps,
                                  int64_t real_tokens);

}  // namespace lb::train::planning
