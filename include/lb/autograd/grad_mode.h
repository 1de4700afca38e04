// Grad mode: whether differentiable ops record nodes. Thread-local, on by default.
#pragma once

namespace lb::autograd {

bool grad_enabled();
void set_grad_enabled(bool on);

}  // namespace lb::autograd

namespace lb {

// Disables recording for its scope (like torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(autograd::grad_enabled()) { autograd::set_grad_enabled(false); }
  ~NoGradGuard() { autograd::set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace lb
