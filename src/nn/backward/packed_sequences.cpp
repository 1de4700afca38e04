// PackedSequencesScope (see lb/nn/backward/packed_sequences.h).
#include "lb/nn/backward/packed_sequences.h"

#include <utility>

#include "lb/core/error.h"

namespace lb::nn::backward {

namespace {
thread_local SequenceOffsets current;
}  // namespace

PackedSequencesScope::PackedSequencesScope(SequenceOffsets offsets) : previous_(std::move(current)) {
  LB_CHECK(offsets && !offsets->empty() && offsets->front() == 0,
           "packed sequences: offsets must start at 0");
  for (size_t i = 1; i < offsets->size(); ++i)
    LB_CHECK((*offsets)[i] >= (*offsets)[i - 1], "packed sequences: offsets must not decrease");
  current = std::move(offsets);
}

PackedSequencesScope::~PackedSequencesScope() { current = std::move(previous_); }

const SequenceOffsets& packed_sequences() { return current; }

}  // namespace lb::nn::backward
