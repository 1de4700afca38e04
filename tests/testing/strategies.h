// Test helpers for the backward strategies: an INSTANT strategy built through the factory
// from a spec (type added), as the concrete class so tests can read its bases; one
// forward/backward of a Linear or Conv2d through a strategy; a calibration around a pass.
#pragma once
#include <gtest/gtest.h>

#include <memory>

#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/instant.h"
#include "lb/nn/backward/strategy.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb::testing {

inline std::shared_ptr<nn::backward::Instant> make_instant(nlohmann::json spec) {
  spec["type"] = "instant";
  auto s = nn::backward::make_strategy(spec, "test");
  return std::shared_ptr<nn::backward::Instant>(static_cast<nn::backward::Instant*>(s.release()));
}

struct Grads {
  Tensor gx, gw, gb;
};

// One forward/backward of y = x wᵀ + b through `s` with upstream gradient g (`call`: a
// padding-free call's sequences).
inline Grads run_linear(const std::shared_ptr<nn::backward::Strategy>& s, const Tensor& x, const Tensor& w,
                        const Tensor& b, const Tensor& g, const nn::backward::CallContext& call = {}) {
  Tensor xi = x.clone(), wi = w.clone(), bi = b.clone();
  xi.set_requires_grad();
  wi.set_requires_grad();
  bi.set_requires_grad();
  Tensor y = nn::backward::strategy_linear(xi, wi, bi, s, call);
  y.backward(g);
  return {xi.grad(), wi.grad(), bi.grad()};
}

inline Grads run_conv(const std::shared_ptr<nn::backward::Strategy>& s, const Tensor& x, const Tensor& w,
                      const Tensor& b, const Tensor& g, const Conv2dArgs& a) {
  Tensor xi = x.clone(), wi = w.clone(), bi = b.clone();
  xi.set_requires_grad();
  wi.set_requires_grad();
  bi.set_requires_grad();
  Tensor y = nn::backward::strategy_conv2d(xi, wi, bi, a, s);
  y.backward(g);
  return {xi.grad(), wi.grad(), bi.grad()};
}

template <typename F>
void calibrate(const std::shared_ptr<nn::backward::Strategy>& s, F&& pass) {
  s->begin_calibration();
  pass();
  s->finish_calibration();
}

// A lossless INSTANT setting: every basis vector kept, no compensation, and low-rank kernels
// even though full ranks gain nothing (so that tests exercise them, not the exact fallback).
inline const nlohmann::json kLossless = {{"rank", 100000}, {"compensate", false}, {"exact_when_no_gain", false}};

inline void expect_equal_grads(const Grads& a, const Grads& b, double rtol, double atol, const char* what) {
  EXPECT_TRUE(all_close(a.gx, b.gx, rtol, atol)) << what << " g_x";
  EXPECT_TRUE(all_close(a.gw, b.gw, rtol, atol)) << what << " g_w";
  EXPECT_TRUE(all_close(a.gb, b.gb, rtol, atol)) << what << " g_b";
}

}  // namespace lb::testing
