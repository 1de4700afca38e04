// Internal: the data-parallel pieces of the trainer over a dist::ProcessGroup (DDP's recipe):
// parameters broadcast from rank 0 at the start, gradients summed over ranks in buckets (every
// rank weights its loss by its share of the global batch, so the sum is the global batch's
// gradient). Overlap: arm() before the step's last backward pass; each bucket's all-reduce
// starts as soon as autograd reports all its parameters' gradients complete (the last layers'
// first), while the backward goes on; finish() waits for them and copies the sums back.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lb/core/device.h"
#include "lb/core/tensor.h"
#include "lb/dist/process_group.h"

namespace lb::train {

// The ranks a run trains over and the device this rank uses: `given` (tests), else on GPUs
// under mpirun (or torchrun's variables) one GPU per rank, its local rank's, with the
// collectives over NCCL (which carries the strings and counts as well), else dist::world().
struct Ranks {
  dist::ProcessGroup* group = nullptr;
  Device device = Device::cpu();
  std::unique_ptr<dist::ProcessGroup> owned;  // the NCCL group, when this made one
};
Ranks join_ranks(dist::ProcessGroup* given, Device device);

// Whether `flag` is set on any rank (every rank stops at the same step: Ctrl-C reaches them
// at different times). `what` names the collective in its errors.
bool on_any_rank(dist::ProcessGroup& group, bool flag, const std::string& what);

class GradientSync {
 public:
  // params: the trainable parameters (any order; buckets follow it reversed, last layers
  // first, the order backward produces them in). bucket_bytes: size of one all-reduce.
  GradientSync(dist::ProcessGroup& group, std::vector<Tensor> params, int64_t bucket_bytes = int64_t{25} << 20);
  ~GradientSync();  // removes the autograd hook if a step was left armed (an error mid-step)
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Every rank takes rank 0's parameter values (bitwise).
  void broadcast_parameters();
  // .grad of every parameter summed over ranks (an undefined .grad counts as zeros and is
  // defined afterwards), bucket by bucket, after the backward (no overlap).
  void all_reduce_gradients();
  // Overlapped: arm() installs the autograd hook for the next backward pass; finish() starts
  // the buckets not started yet, waits for all, writes the sums into .grad and removes the
  // hook. finish_wait_ms(): the time finish() spent (what the overlap did not hide).
  void arm();
  void finish();
  double finish_wait_ms() const { return last_finish_ms_; }

  double ms_total() const { return ms_total_; }
  int64_t bytes_per_step() const { return bytes_per_step_; }
  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    DType dtype;
    std::vector<size_t> params;  // indices into params_
    int64_t numel = 0;
    // Overlap state of the armed step.
    size_t ready = 0;
    bool started = false;
    int64_t request = 0;
    Tensor flat;
  };
  void start_bucket(size_t b);
  void unpack_bucket(size_t b);
  dist::ProcessGroup& group_;
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  int64_t bytes_per_step_ = 0;
  double ms_total_ = 0, last_finish_ms_ = 0;
  std::vector<size_t> bucket_of_;                       // param index -> bucket
  std::unordered_map<const TensorImpl*, size_t> index_of_;  // param impl -> index
  std::vector<bool> param_ready_;
  bool armed_ = false;
};

}  // namespace lb::train
