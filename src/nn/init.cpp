// Parameter initialisers.
#include "lb/nn/init.h"

#include <cmath>

#include "lb/core/checks.h"
#include "lb/core/random.h"

namespace lb::nn::init {

namespace {
thread_local std::vector<DeferredInit::Pending>* deferred = nullptr;

void draw(const DeferredInit::Pending& p, PhiloxStream& rng) {
  Tensor t = p.t;  // a handle: the values go where the caller's tensor is
  t.copy_(p.normal ? rand_normal(p.t.shape(), rng, p.a, p.b, DType::F64)
                     : rand_uniform(p.t.shape(), rng, p.a, p.b, DType::F64));
}

void init(Tensor& t, bool normal, double a, double b) {
  PhiloxStream& g = default_generator();
  if (!deferred) {
    draw({t, normal, a, b, {}}, g);
    return;
  }
  deferred->push_back({t, normal, a, b, g.state()});
  const auto n = static_cast<uint64_t>(t.numel());
  if (normal) g.skip_normals(n);
  else g.skip_uniforms(n);
}
}  // namespace

DeferredInit::DeferredInit() {
  LB_CHECK(!deferred, "internal: nested DeferredInit");
  deferred = &pending_;
}

DeferredInit::~DeferredInit() {
  if (active_) deferred = nullptr;
}

void DeferredInit::replay(const std::function<bool(const Storage*)>& needed) {
  if (active_) deferred = nullptr;
  active_ = false;
  for (const Pending& p : pending_) {
    if (!needed(p.t.storage().get())) continue;
    PhiloxStream rng;
    rng.set_state(p.from);
    draw(p, rng);
  }
  pending_.clear();
}

void uniform_(Tensor& t, double lo, double hi) { init(t, false, lo, hi); }

void normal_(Tensor& t, double mean, double std) { init(t, true, mean, std); }

void constant_(Tensor& t, double value) { t.fill_(value); }

void kaiming_uniform_default_(Tensor& w, int64_t fan_in) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  uniform_(w, -bound, bound);
}

void kaiming_normal_fan_out_(Tensor& w, int64_t fan_out) {
  normal_(w, 0.0, std::sqrt(2.0 / static_cast<double>(fan_out)));
}

}  // namespace lb::nn::init
