// The trainer's data-parallel pieces (see data_parallel.h).
#include "src/train/data_parallel.h"

#include <chrono>

#include "lb/autograd/node.h"
#include "lb/core/error.h"
#include "lb/dist/nccl_group.h"

namespace lb::train {

Ranks join_ranks(dist::ProcessGroup* given, Device device) {
  Ranks r;
  r.device = device;
  if (given) {
    r.group = given;
    return r;
  }
  if (device.is_cuda() && dist::world().size() > 1) {
    LB_CHECK(dist::nccl_compiled(), "--device ", device.str(), " with ", dist::world().size(),
             " ranks: this build has no NCCL, which data-parallel training on GPUs runs over");
    r.device = Device::cuda(dist::nccl_device_of_this_rank());
    r.owned = dist::make_nccl_group(r.device.index);
  }
  r.group = r.owned ? r.owned.get() : &dist::world();
  return r;
}

bool on_any_rank(dist::ProcessGroup& group, bool flag, const std::string& what) {
  if (group.size() == 1) return flag;
  std::vector<double> v{flag ? 1.0 : 0.0};
  group.all_reduce_sum(v, what);
  return v[0] > 0;
}

GradientSync::GradientSync(dist::ProcessGroup& group, std::vector<Tensor> params, int64_t bucket_bytes)
    : group_(group), params_(std::move(params)) {
  for (size_t i = params_.size(); i-- > 0;) {
    const Tensor& p = params_[i];
    LB_CHECK(p.is_contiguous(), "data-parallel: parameter ", i, " is not contiguous");
    const int64_t bytes = static_cast<int64_t>(p.nbytes());
    if (buckets_.empty() || buckets_.back().dtype != p.dtype() ||
        (buckets_.back().numel * static_cast<int64_t>(dtype_size(p.dtype())) + bytes > bucket_bytes &&
         !buckets_.back().params.empty()))
      buckets_.emplace_back().dtype = p.dtype();
    buckets_.back().params.push_back(i);
    buckets_.back().numel += p.numel();
    bytes_per_step_ += bytes;
  }
  bucket_of_.resize(params_.size());
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t i : buckets_[b].params) bucket_of_[i] = b;
  for (size_t i = 0; i < params_.size(); ++i) index_of_[params_[i].impl_ptr().get()] = i;
}

void GradientSync::broadcast_parameters() {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor p = params_[i];
    group_.broadcast(p, 0, "parameter " + std::to_string(i) + " (start of training)");
  }
}

// A bucket is one flat tensor on the parameters' device (the MPI group carries CPU tensors,
// the NCCL group CUDA ones); gradients go in and out by copies on that device.
void GradientSync::start_bucket(size_t b) {
  Bucket& bk = buckets_[b];
  const Device dev = params_[bk.params.front()].device();
  bk.flat = Tensor::empty({bk.numel}, bk.dtype, dev, MemTag::Workspace);
  int64_t at = 0;
  for (size_t i : bk.params) {
    const Tensor g = params_[i].grad();
    const int64_t n = params_[i].numel();
    Tensor part = bk.flat.slice(0, at, at + n);
    if (g.defined()) part.copy_(g.reshape({n}));
    else part.zero_();
    at += n;
  }
  bk.request = group_.all_reduce_sum_start(bk.flat, "gradients (bucket " + std::to_string(b + 1) + " of " +
                                                        std::to_string(buckets_.size()) + ")");
  bk.started = true;
}

void GradientSync::unpack_bucket(size_t b) {
  Bucket& bk = buckets_[b];
  int64_t at = 0;
  for (size_t i : bk.params) {
    Tensor& p = params_[i];
    const int64_t n = p.numel();
    Tensor g = p.grad();
    if (!g.defined() || !g.is_contiguous()) {
      g = Tensor::empty(p.shape(), p.dtype(), p.device(), MemTag::Gradient);
      p.set_grad(g);
    }
    g.view({n}).copy_(bk.flat.slice(0, at, at + n));
    at += n;
  }
  bk.flat = Tensor();
  bk.started = false;
  bk.ready = 0;
}

GradientSync::~GradientSync() {
  if (armed_) autograd::set_leaf_grad_ready_hook({});
}

void GradientSync::arm() {
  if (group_.size() == 1) return;
  armed_ = true;
  param_ready_.assign(params_.size(), false);
  for (auto& bk : buckets_) {
    bk.ready = 0;
    bk.started = false;
  }
  autograd::set_leaf_grad_ready_hook([this](const TensorImpl* leaf) {
    const auto it = index_of_.find(leaf);
    if (it == index_of_.end() || param_ready_[it->second]) return;
    param_ready_[it->second] = true;
    const size_t b = bucket_of_[it->second];
    if (++buckets_[b].ready == buckets_[b].params.size()) start_bucket(b);
    group_.progress();
  });
}

void GradientSync::finish() {
  if (group_.size() == 1) return;
  autograd::set_leaf_grad_ready_hook({});
  armed_ = false;
  const auto t0 = std::chrono::steady_clock::now();
  // Buckets the backward did not complete (parameters it did not reach) start now, in order.
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!buckets_[b].started) start_bucket(b);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    group_.wait(buckets_[b].request);
    unpack_bucket(b);
  }
  last_finish_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ms_total_ += last_finish_ms_;
}

void GradientSync::all_reduce_gradients() {
  if (group_.size() == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    start_bucket(b);
    group_.wait(buckets_[b].request);
    unpack_bucket(b);
  }
  ms_total_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace lb::train
