// Recomputation (contract in lb/autograd/recompute.h).
#include "lb/autograd/recompute.h"

#include "lb/autograd/node.h"
#include "lb/core/random.h"

namespace lb::autograd {

namespace {
thread_local int t_recomputing = 0;

// Recording on, and recomputing() true, for its scope.
class RecomputeScope {
 public:
  RecomputeScope() : grad_(grad_enabled()) {
    set_grad_enabled(true);
    ++t_recomputing;
  }
  ~RecomputeScope() {
    --t_recomputing;
    set_grad_enabled(grad_);
  }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  bool grad_;
};
}  // namespace

bool recomputing() { return t_recomputing > 0; }

Tensor recompute_in_backward(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x,
                             const std::string& name) {
  if (!grad_enabled()) return fn(x);
  const PhiloxStream::State rng_at = default_generator().state();
  Tensor y;
  {
    NoGradGuard no_grad;
    y = fn(x);
  }
  record(name, y, {x}, {x},
         [fn, rng_at](const Tensor& g, const std::vector<Tensor>& saved, const std::vector<bool>& need) {
           PhiloxStream& gen = default_generator();
           const PhiloxStream::State now = gen.state();
           Tensor xi = saved[0].detach();
           if (need[0]) xi.set_requires_grad(true);
           Tensor y2;
           {
             const RecomputeScope recompute;
             gen.set_state(rng_at);
             try {
               y2 = fn(xi);
             } catch (...) {
               gen.set_state(now);
               throw;
             }
             gen.set_state(now);
           }
           if (y2.requires_grad()) y2.backward(g);
           Tensor gx = need[0] ? xi.grad() : Tensor();
           // xi is a leaf for this inner backward only, and the engine accounts leaf gradients
           // as the model's; the block's input gradient is activation memory (it counts toward
           // the activation peak a budget bounds). Nothing else holds its storage.
           if (gx.defined()) gx.storage()->set_tag(MemTag::Other);
           return std::vector<Tensor>{gx};
         });
  return y;
}

}  // namespace lb::autograd
