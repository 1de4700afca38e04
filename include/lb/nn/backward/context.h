// What a strategy call knows besides its tensors, passed explicitly (no thread-locals, no
// global caches): the step whose random streams it draws from, and, per call, a padding-free
// batch's sequences and the input a module shares between several of its layers.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::nn::backward {

// The key of a step's random draws (HOT's stochastic rounding: Philox subsequence/offset).
// The training loop owns one and gives it to the strategies (Strategy::set_step_context);
// each save copies it into its state, so a backward draws from the step of its forward.
struct StepContext {
  uint64_t seed = 0;
  int64_t step = 0;
  // Which stream of the step: the training run's, or another consumer's (the gradient probe)
  // that must never shift it.
  uint64_t stream = 0;
};
inline constexpr uint64_t kTrainingStream = 0;
inline constexpr uint64_t kProbeStream = 1;

// B + 1 offsets into the N packed tokens of a padding-free call (lb/nn/token_packing.h):
// sequence b is tokens offsets[b] .. offsets[b+1] (positions 0 .. L_b - 1 of its padded row),
// offsets[0] = 0, offsets[B] = N.
using SequenceOffsets = std::shared_ptr<const std::vector<int64_t>>;

// An input several layers of one module read (BERT's query, key and value read the same x).
// The module creates one per forward and passes it to those layers' calls; a strategy that
// keeps a function of x (INSTANT's projection x̂) computes it once per key, and the layers
// keep the same tensor (the tape counts a storage once), as vanilla keeps their shared x once.
class SharedInput {
 public:
  // The tensor kept under `key`, or compute()'s result, kept under it for the next layer.
  Tensor get_or_compute(const std::string& key, const std::function<Tensor()>& compute) {
    auto it = kept_.find(key);
    if (it != kept_.end()) return it->second;
    Tensor t = compute();
    kept_.emplace(key, t);
    return t;
  }

 private:
  std::map<std::string, Tensor> kept_;
};

// One Linear (or Conv2d) call's context, from the module that makes the call.
struct CallContext {
  // A padding-free call: x is (1, N, I) and these are its sequences. Null: not packed.
  SequenceOffsets sequences;
  // The input shared with sibling layers of the same module call (null: none).
  std::shared_ptr<SharedInput> shared;
};

}  // namespace lb::nn::backward
