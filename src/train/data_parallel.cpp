// GradientSync (see data_parallel.h).
#include "src/train/data_parallel.h"

#include <chrono>
#include <cstring>

#include "lb/core/error.h"

namespace lb::train {

GradientSync::GradientSync(dist::ProcessGroup& group, std::vector<Tensor> params, int64_t bucket_bytes)
    : group_(group), params_(std::move(params)) {
  for (size_t i = params_.size(); i-- > 0;) {
    const Tensor& p = params_[i];
    LB_CHECK(p.is_contiguous(), "data-parallel: parameter ", i, " is not contiguous");
    const int64_t bytes = static_cast<int64_t>(p.nbytes());
    if (buckets_.empty() || buckets_.back().dtype != p.dtype() ||
        (buckets_.back().numel * static_cast<int64_t>(dtype_size(p.dtype())) + bytes > bucket_bytes &&
         !buckets_.back().params.empty()))
      buckets_.push_back({p.dtype(), {}, 0});
    buckets_.back().params.push_back(i);
    buckets_.back().numel += p.numel();
    bytes_per_step_ += bytes;
  }
}

void GradientSync::broadcast_parameters() {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor p = params_[i];
    group_.broadcast(p, 0, "parameter " + std::to_string(i) + " (start of training)");
  }
}

void GradientSync::all_reduce_gradients() {
  if (group_.size() == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bk = buckets_[b];
    Tensor flat = Tensor::empty({bk.numel}, bk.dtype, Device::cpu(), MemTag::Workspace);
    char* dst = static_cast<char*>(flat.raw_data());
    for (size_t i : bk.params) {
      const Tensor g = params_[i].grad();
      const size_t n = params_[i].nbytes();
      if (g.defined()) {
        const Tensor gc = g.contiguous();
        std::memcpy(dst, gc.raw_data(), n);
      } else {
        std::memset(dst, 0, n);
      }
      dst += n;
    }
    group_.all_reduce_sum(flat, "gradients (bucket " + std::to_string(b + 1) + " of " +
                                    std::to_string(buckets_.size()) + ")");
    const char* src = static_cast<const char*>(flat.raw_data());
    for (size_t i : bk.params) {
      Tensor& p = params_[i];
      const size_t n = p.nbytes();
      Tensor g = p.grad();
      if (!g.defined() || !g.is_contiguous()) {
        g = Tensor::empty(p.shape(), p.dtype(), p.device(), MemTag::Gradient);
        p.set_grad(g);
      }
      std::memcpy(g.raw_data(), src, n);
      src += n;
    }
  }
  ms_total_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace lb::train
