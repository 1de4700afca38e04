// The sequences of a padding-free batch (lb/nn/token_packing.h) for the strategies that work
// per sequence. A packed Linear call sees x (1, N, C): the kept tokens of B sequences back to
// back, which is all a token-wise computation needs; INSTANT's token-axis projection, though,
// projects each sequence on its own (x̂_b = P x_b), so it needs the boundaries. The model sets
// them for the span of its packed forward (PackedSequencesScope); Strategy::save records them in
// the call's SavedState, so backward and calibration see the same ones.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace lb::nn::backward {

// B + 1 offsets into the N packed tokens: sequence b is tokens offsets[b] .. offsets[b+1]
// (positions 0 .. L_b - 1 of its padded row), offsets[0] = 0, offsets[B] = N.
using SequenceOffsets = std::shared_ptr<const std::vector<int64_t>>;

// Makes `offsets` the packed sequences of every strategy call on this thread until it ends
// (scopes nest; the innermost wins).
class PackedSequencesScope {
 public:
  explicit PackedSequencesScope(SequenceOffsets offsets);
  ~PackedSequencesScope();
  PackedSequencesScope(const PackedSequencesScope&) = delete;
  PackedSequencesScope& operator=(const PackedSequencesScope&) = delete;

 private:
  SequenceOffsets previous_;
};

// The innermost scope's offsets, or null.
const SequenceOffsets& packed_sequences();

}  // namespace lb::nn::backward
