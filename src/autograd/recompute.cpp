// Recomputation (contract in lb/autograd/recompute.h).
#include "lb/autograd/recompute.h"

#include <optional>

#include "lb/autograd/kept_input.h"
#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/precision.h"
#include "lb/core/random.h"

namespace lb::autograd {

namespace {
thread_local int t_recomputing = 0;
thread_local int t_exact = 0;
thread_local int t_unread = 0;

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

UnreadValuesScope::UnreadValuesScope() { ++t_unread; }
UnreadValuesScope::~UnreadValuesScope() { --t_unread; }
bool values_unread() { return t_unread > 0 && t_recomputing > 0; }

ExactRecomputeScope::ExactRecomputeScope() { ++t_exact; }
ExactRecomputeScope::~ExactRecomputeScope() { --t_exact; }

Tensor recompute_in_backward(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x,
                             const std::string& name, bool bf16_products) {
  if (!grad_enabled()) return fn(x);
  const PhiloxStream::State rng_at = default_generator().state();
  Tensor y;
  {
    NoGradGuard no_grad;
    y = fn(x);
  }
  // Asked when the node is made: the probe's exact pass runs its backward inside the scope too.
  const bool bf16 = bf16_products && t_exact == 0;
  // x, or what its producer keeps to give it back (no new bytes).
  KeptInput kept = keep_input(x, x);
  std::vector<Tensor> to_save = std::move(kept.tensors);
  kept.tensors.clear();
  record(name, y, {x}, to_save,
         [fn, rng_at, bf16, kept = std::move(kept)](const Tensor& g, const std::vector<Tensor>& saved,
                                                    const std::vector<bool>& need) {
           PhiloxStream& gen = default_generator();
           const PhiloxStream::State now = gen.state();
           Tensor xi = kept.get(saved).detach();
           if (need[0]) xi.set_requires_grad(true);
           // xi is a leaf for this inner backward only: its gradient, accumulated while the
           // block's backward runs, is the block's input gradient, activation memory (it counts
           // toward the activation peak a budget bounds), not a model gradient.
           xi.impl()->grad_tag = MemTag::Other;
           Tensor y2;
           {
             const RecomputeScope recompute;
             // bf16 products for the second forward only; what it keeps stays f32, and the
             // block's backward runs in the step's own precision.
             std::optional<MatmulPrecisionScope> precision;
             std::optional<Bf16SavingScope> saving;
             if (bf16) {
               precision.emplace(MatmulPrecision::BF16);
               saving.emplace(false);
             }
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
           return std::vector<Tensor>{need[0] ? xi.grad() : Tensor()};
         });
  return y;
}

}  // namespace lb::autograd
