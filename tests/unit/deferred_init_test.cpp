// Deferred initialisation (lb/nn/init.h): skipping a stream's draws leaves it where drawing
// leaves it (uniforms; normals with and without a pending second value, odd and even counts);
// layers built under a DeferredInit and replayed get eager initialisation's values bit for bit,
// replaying only some leaves the others untouched and the generator where eager leaves it.
#include <gtest/gtest.h>

#include <vector>

#include "lb/core/philox.h"
#include "lb/core/random.h"
#include "lb/nn/init.h"
#include "lb/nn/layers.h"

namespace lb {
namespace {

void expect_same_state(const PhiloxStream& a, const PhiloxStream& b, const std::string& what) {
  const auto x = a.state(), y = b.state();
  EXPECT_EQ(x.offset, y.offset) << what;
  EXPECT_EQ(x.has_cached_normal, y.has_cached_normal) << what;
  if (x.has_cached_normal) {
    EXPECT_EQ(x.cached_normal, y.cached_normal) << what;
  }
}

TEST(DeferredInit, SkippingDrawsLeavesTheStreamWhereDrawingDoes) {
  for (bool pending : {false, true})
    for (uint64_t n : {0, 1, 2, 3, 7, 8}) {
      const std::string what = "n " + std::to_string(n) + (pending ? ", a value pending" : "");
      PhiloxStream drawn(5, 0, 3), skipped(5, 0, 3);
      if (pending) drawn.normal(), skipped.normal();
      for (uint64_t i = 0; i < n; ++i) drawn.normal();
      skipped.skip_normals(n);
      expect_same_state(drawn, skipped, "normals, " + what);
      EXPECT_EQ(drawn.normal(), skipped.normal()) << what;
      for (uint64_t i = 0; i < n; ++i) drawn.uniform();
      skipped.skip_uniforms(n);
      EXPECT_EQ(drawn.uniform(), skipped.uniform()) << "uniforms, " + what;
    }
}

std::vector<std::vector<double>> values(const std::vector<nn::Linear*>& layers) {
  std::vector<std::vector<double>> out;
  for (auto* l : layers)
    for (const auto& [_, p] : l->named_parameters()) out.push_back(p.to_double_vector());
  return out;
}

TEST(DeferredInit, ReplayGivesEagerValuesAndLeavesTheRest) {
  manual_seed(9);
  nn::Linear a(7, 5), b(3, 4), c(5, 5);
  nn::init::normal_(c.weight(), 0.0, 0.02);  // an odd count of normals, as BERT's init draws
  const auto eager = values({&a, &b, &c});
  const PhiloxStream after = default_generator();

  manual_seed(9);
  nn::init::DeferredInit all;
  nn::Linear a2(7, 5), b2(3, 4), c2(5, 5);
  nn::init::normal_(c2.weight(), 0.0, 0.02);
  expect_same_state(default_generator(), after, "deferred, before replay");
  all.replay([](const Storage*) { return true; });
  EXPECT_EQ(values({&a2, &b2, &c2}), eager);
  expect_same_state(default_generator(), after, "after replay");

  // Only b replayed: a and c keep what they held (zeros here), b gets its eager values.
  manual_seed(9);
  nn::init::DeferredInit some;
  nn::Linear a3(7, 5), b3(3, 4), c3(5, 5);
  nn::init::normal_(c3.weight(), 0.0, 0.02);
  for (auto* l : {&a3, &c3})
    for (auto& [_, p] : l->named_parameters()) p.fill_(0.0);
  const Storage* bw = b3.weight().storage().get();
  const Storage* bb = b3.named_parameters().back().second.storage().get();
  some.replay([&](const Storage* s) { return s == bw || s == bb; });
  const auto got = values({&a3, &b3, &c3});
  EXPECT_EQ(got[2], eager[2]);  // b's weight
  EXPECT_EQ(got[3], eager[3]);  // b's bias
  for (size_t i : {0, 1, 4, 5})
    for (double v : got[i]) EXPECT_EQ(v, 0.0);
  expect_same_state(default_generator(), after, "after a partial replay");
  // Out of scope, initialisation draws at once again.
  manual_seed(9);
  nn::Linear a4(7, 5);
  EXPECT_EQ(values({&a4})[0], eager[0]);
}

}  // namespace
}  // namespace lb
