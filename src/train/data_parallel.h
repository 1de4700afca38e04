// Internal: the data-parallel pieces of the trainer over a dist::ProcessGroup (DDP's recipe):
// parameters broadcast from rank 0 at the start, gradients summed over ranks in buckets after
// each optimizer step's backward passes (every rank weights its loss by its share of the global
// batch, so the sum is the global batch's gradient).
#pragma once
#include <cstdint>
#include <vector>

#include "lb/core/tensor.h"
#include "lb/dist/process_group.h"

namespace lb::train {

class GradientSync {
 public:
  // params: the trainable parameters (any order; buckets follow it reversed, last layers
  // first, the order backward produces them in). bucket_bytes: size of one all-reduce.
  GradientSync(dist::ProcessGroup& group, std::vector<Tensor> params, int64_t bucket_bytes = int64_t{25} << 20);

  // Every rank takes rank 0's parameter values (bitwise).
  void broadcast_parameters();
  // .grad of every parameter summed over ranks (an undefined .grad counts as zeros and is
  // defined afterwards), bucket by bucket.
  void all_reduce_gradients();

  double ms_total() const { return ms_total_; }
  int64_t bytes_per_step() const { return bytes_per_step_; }
  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    DType dtype;
    std::vector<size_t> params;  // indices into params_
    int64_t numel = 0;
  };
  dist::ProcessGroup& group_;
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  int64_t bytes_per_step_ = 0;
  double ms_total_ = 0;
};

}  // namespace lb::train
