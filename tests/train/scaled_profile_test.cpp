// The memory planner's profiles on two small batches, extrapolated to the config's batch
// (src/train/memory/scaled_report.h), against the same profile measured on the full batch: on
// a BERT whose activations dominate its step (as a full-size model's do), every kept tensor's
// bytes on its line to within 1%, the activation peak never under-read and at most 25% over,
// the bytes in flight at the peak likewise; a batch under 8 is profiled as it is.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "lb/train/memory/memory_report.h"
#include "src/train/memory/memory_plan_parts.h"
#include "src/train/memory/scaled_report.h"
#include "testing/train_configs.h"

namespace lb::train::planning {
namespace {

// Kept bytes by (module, op, role).
std::map<std::tuple<std::string, std::string, std::string>, int64_t> by_key(const MemoryReport& r) {
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> out;
  for (const auto& e : r.entries) out[{e.module, e.op, e.role}] += e.bytes;
  return out;
}

int64_t kept_at_peak(const MemoryReport& r) {
  int64_t k = 0;
  if (r.peak_site)
    for (const auto& e : r.peak_site->kept) k += e.bytes;
  return k;
}

Config mid_bert(int64_t batch, const std::vector<std::string>& recompute, const std::string& codec) {
  nlohmann::json j = testing::tiny_bert_config(2, 0.0);
  j["model"]["hidden_size"] = 128;
  j["model"]["intermediate_size"] = 512;
  j["model"]["num_attention_heads"] = 4;
  j["model"]["max_position_embeddings"] = 64;
  j["data"]["max_seq_len"] = 64;
  j["data"]["batch_size"] = batch;
  j["data"]["synthetic_train"] = 64;
  std::vector<autograd::CodecRule> codecs;
  if (codec != "f32") codecs.push_back(rule("*", codec));
  return with_memory(worst_case_batch(Config::from_json(j, "mid.json")), codecs, recompute);
}

TEST(ScaledProfile, ExtrapolatesTwoSmallBatchesToTheFullOne) {
  EXPECT_FALSE(profile_batches(mid_bert(4, {}, "f32")).scaled());
  EXPECT_TRUE(profile_batches(mid_bert(8, {}, "f32")).scaled());
  const std::vector<std::string> blocks = {"bert.encoder.layer.0", "bert.encoder.layer.1"};
  for (const auto& [recompute, codec] : std::vector<std::pair<bool, std::string>>{
           {false, "f32"}, {false, "int8"}, {true, "f32"}, {true, "int8"}}) {
    const std::string what = std::string(recompute ? "recompute + " : "") + codec;
    const Config c = mid_bert(32, recompute ? blocks : std::vector<std::string>{}, codec);
    const MemoryReport full = memory_report(c, "", 0);
    const MemoryReport scaled = scaled_memory_report(c, "", 0, 0);
    EXPECT_EQ(scaled.examples, 32) << what;
    const auto f = by_key(full), s = by_key(scaled);
    ASSERT_EQ(f.size(), s.size()) << what;
    for (const auto& [key, bytes] : f) {
      ASSERT_TRUE(s.count(key)) << what << ": " << std::get<0>(key) << " " << std::get<1>(key);
      EXPECT_NEAR(static_cast<double>(s.at(key)), static_cast<double>(bytes), 0.01 * static_cast<double>(bytes) + 64)
          << what << ": " << std::get<0>(key) << " " << std::get<1>(key) << " " << std::get<2>(key);
    }
    EXPECT_NEAR(static_cast<double>(scaled.saved_bytes), static_cast<double>(full.saved_bytes),
                0.01 * static_cast<double>(full.saved_bytes))
        << what;
    const double peak = static_cast<double>(full.activation_peak_bytes);
    EXPECT_GE(static_cast<double>(scaled.activation_peak_bytes), peak) << what;
    EXPECT_LE(static_cast<double>(scaled.activation_peak_bytes), 1.25 * peak) << what;
    const double in_flight = static_cast<double>(full.activation_peak_bytes - kept_at_peak(full));
    const double scaled_in_flight = static_cast<double>(scaled.activation_peak_bytes - kept_at_peak(scaled));
    EXPECT_GE(scaled_in_flight, 0.9 * in_flight) << what;
    EXPECT_LE(scaled_in_flight, 1.5 * in_flight + 0.05 * peak) << what;
    // What the two small profiles held, the planner's own peak: a fraction of the full step's.
    EXPECT_LT(scaled.run_peak_bytes, full.run_peak_bytes) << what;
  }
}

}  // namespace
}  // namespace lb::train::planning
