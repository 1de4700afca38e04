// Internal: carries out a memory plan made per batch length (MemoryPlan::by_length) during
// training. Before each step, the plan for its longest sequence (and its micro-batches' real
// tokens) is put in force — the kept-
// tensor codecs on the TrainStep, recomputation on the model's blocks — switching only when
// it changes; a batch without sequences (images) or longer than every shorter plan runs the
// plan of the longest batch, which set_up_training put in force at the start.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lb/autograd/saved_codec.h"
#include "lb/data/batch.h"
#include "lb/nn/module.h"
#include "lb/train/memory/memory_planner.h"
#include "lb/train/train_step.h"

namespace lb::train {

class BatchLengthPlans {
 public:
  // `longest_codecs`: the codecs the TrainStep was built with (the longest batch's plan).
  BatchLengthPlans(const MemoryPlan& plan, nn::Module& module, TrainStep& step,
                   std::shared_ptr<const autograd::CodecRules> longest_codecs);

  // Puts in force the plan for these micro-batches; returns its index (MemoryPlan::
  // length_plan_for: -1 is the longest batch's plan) and counts the step under it.
  int apply(const std::vector<data::Batch>& micro);
  // The same without counting a step (a calibration pass on its own batches).
  int put_in_force_for(const std::vector<data::Batch>& micro);
  // Steps run under each plan so far, by its LengthPlan::label() ("longest": the longest
  // batch's plan).
  const std::map<std::string, int64_t>& steps() const { return steps_; }

 private:
  void put_in_force(int index);
  const MemoryPlan& plan_;
  nn::Module& module_;
  TrainStep& step_;
  std::vector<std::shared_ptr<const autograd::CodecRules>> codecs_;  // [index + 1]
  int current_ = -1;
  std::map<std::string, int64_t> steps_;
};

}  // namespace lb::train
