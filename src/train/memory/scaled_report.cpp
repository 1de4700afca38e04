// The planner's profiles on small batches, extrapolated (see scaled_report.h).
#include "src/train/memory/scaled_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

namespace lb::train::planning {

namespace {

// The line through (b1, x1) and (b2, x2) at b, for what is a sum of tensors (kept bytes).
struct Line {
  double b1, b2, b;
  double at(double x1, double x2) const { return x2 + (x2 - x1) / (b2 - b1) * (b - b2); }
  int64_t bytes(int64_t x1, int64_t x2) const {
    return static_cast<int64_t>(std::llround(std::max<double>(static_cast<double>(x2),
                                                               at(static_cast<double>(x1), static_cast<double>(x2)))));
  }
  // A peak is a maximum over the step's moments of such lines, set where the batch's share
  // is largest once the batch is large: the line through two small batches under-reads it
  // (MiniLM, every layer recomputed + int8: 9.1 and 13.5 MB at 2 and 4 examples, 108.0 at 32,
  // where the line says 75). x2 · b / b2 never does while each moment's constant part is
  // non-negative, and reads 108.0 there.
  int64_t peak(int64_t x2) const {
    return static_cast<int64_t>(std::llround(static_cast<double>(x2) * b / b2));
  }
};

// Each kept tensor of `large` with its bytes extended along the line, matched to `small`'s by
// (module, op, role, dtype) and the order among equals; one `small` lacks grows in proportion.
std::vector<autograd::SavedEntry> extend(const std::vector<autograd::SavedEntry>& small,
                                         const std::vector<autograd::SavedEntry>& large, const Line& line) {
  using Key = std::tuple<std::string, std::string, std::string, DType>;
  std::map<Key, std::vector<int64_t>> by_key;
  for (const auto& e : small) by_key[{e.module, e.op, e.role, e.dtype}].push_back(e.bytes);
  std::map<Key, size_t> seen;
  std::vector<autograd::SavedEntry> out = large;
  for (auto& e : out) {
    const Key k{e.module, e.op, e.role, e.dtype};
    const auto it = by_key.find(k);
    const size_t i = seen[k]++;
    const bool matched = it != by_key.end() && i < it->second.size();
    e.bytes = matched ? line.bytes(it->second[i], e.bytes)
                      : static_cast<int64_t>(std::llround(static_cast<double>(e.bytes) * line.b / line.b2));
  }
  return out;
}

Config with_examples(Config c, int64_t examples) {
  c.data.batch_size = examples;
  return c;
}

}  // namespace

ProfileBatches profile_batches(const Config& config) {
  if (config.data.batch_size < 8) return {};
  return {2, 4};
}

MemoryReport scaled_memory_report(const Config& config, const std::string& strategy, int timed_steps,
                                  int64_t real_tokens) {
  const ProfileBatches pb = profile_batches(config);
  if (!pb.scaled()) {
    MemoryReport r = memory_report(config, strategy, timed_steps, real_tokens);
    return r;
  }
  const int64_t batch = config.data.batch_size;
  // Real tokens in the same share of the batch, one per sequence at least.
  const auto tokens = [&](int64_t examples) {
    if (real_tokens <= 0) return int64_t{0};
    return std::max(examples, static_cast<int64_t>(std::llround(static_cast<double>(real_tokens) *
                                                                static_cast<double>(examples) /
                                                                static_cast<double>(batch))));
  };
  // Timed on the larger only: what one step's time over two small ones says is mostly noise
  // (a 2-example MiniLM step is ~0.35 s; 50 ms of jitter moves the line's 32-example end by
  // 0.7 s). In proportion to the batch, the step's fixed part (the optimizer's update) is
  // over-read, but it is the same in every option, so the differences the planner weighs
  // between options are not.
  const MemoryReport s = memory_report(with_examples(config, pb.small), strategy, 0, tokens(pb.small));
  MemoryReport r = memory_report(with_examples(config, pb.large), strategy, timed_steps, tokens(pb.large));
  const Line line{static_cast<double>(pb.small), static_cast<double>(pb.large), static_cast<double>(batch)};
  r.examples = batch;
  r.entries = extend(s.entries, r.entries, line);
  r.saved_bytes = line.bytes(s.saved_bytes, r.saved_bytes);
  r.activation_peak_bytes = line.peak(r.activation_peak_bytes);
  for (int t = 0; t < kNumMemTags; ++t) r.at_activation_peak[t] = line.peak(r.at_activation_peak[t]);
  // Not extrapolated: the whole step's peak mixes what does not grow (parameters, state) with
  // what does; the planner measures it on the full batch.
  r.step_peak_bytes = 0;
  r.step_peak_by_tag = {};
  if (r.peak_site) {  // what was kept at the peak: tensors, each on its line
    r.peak_site->activation_bytes = line.peak(r.peak_site->activation_bytes);
    r.peak_site->kept = extend(s.peak_site ? s.peak_site->kept : std::vector<autograd::SavedEntry>{},
                               r.peak_site->kept, line);
  }
  if (timed_steps > 0) r.step_ms = r.step_ms * line.b / line.b2;
  r.timed.clear();
  r.run_peak_bytes = std::max(s.run_peak_bytes, r.run_peak_bytes);
  return r;
}

}  // namespace lb::train::planning
