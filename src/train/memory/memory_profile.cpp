// The memory planner: profiling the options, one training step each (memory_planner.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "lb/core/error.h"
#include "lb/io/json_file.h"
#include "lb/train/memory/memory_report.h"
#include "src/backend/kernel_info.h"
#include "src/train/memory/memory_plan_parts.h"
#include "src/train/memory/scaled_report.h"

namespace lb::train {

using namespace planning;  // NOLINT: the parts' shared helpers (memory_plan_parts.h)

namespace {

// by (codec, recompute, bf16 products)
using Reports = std::map<std::tuple<std::string, bool, bool>, MemoryReport>;

// The batch a profile is for, for the planner's progress lines: "32 x 128", "32 x 128, 900
// real tokens", "64 images"; "(from 2 and 4)" where it is extrapolated (scaled_report.h).
std::string batch_shape(const Config& c, int64_t real_tokens) {
  std::string s = std::to_string(c.data.batch_size);
  if (c.data.max_seq_len > 0 && c.data.task != "cifar10" && c.data.task != "cifar100" && c.data.task != "image_folder")
    s += " x " + std::to_string(c.data.max_seq_len);
  else
    s += " images";
  if (real_tokens > 0) s += ", " + std::to_string(real_tokens) + " real tokens";
  const ProfileBatches pb = profile_batches(c);
  if (pb.scaled()) s += " (from " + std::to_string(pb.small) + " and " + std::to_string(pb.large) + ")";
  return s;
}

// One attributed and two timed steps per option of `options` on `config` (on two small
// batches, extrapolated: scaled_report.h).
Reports profile_options(const Config& config, const std::string& strategy, const std::vector<KeepOption>& options,
                        std::vector<std::string>& blocks, int64_t real_tokens, const PlanWatch& watch,
                        int timed_steps = 2) {
  Reports reports;
  for (size_t k = 0; k < options.size(); ++k) {
    const KeepOption& o = options[k];
    watch.check(config);
    std::vector<autograd::CodecRule> codecs;
    if (o.codec != "f32") codecs.push_back(rule("*", o.codec));
    if (o.recompute && blocks.empty())
      throw Error(config.source + ": memory.budget: this model has no block that can be recomputed, so the "
                  "planner has nothing to choose from but codecs; give memory.codecs instead");
    const std::vector<std::string> recomputed = o.recompute ? blocks : std::vector<std::string>{};
    MemoryReport r = scaled_memory_report(o.bf16_products ? with_memory(config, codecs, {}, recomputed)
                                                          : with_memory(config, codecs, recomputed),
                                          strategy, timed_steps, real_tokens);
    watch.held(r.run_peak_bytes);
    if (blocks.empty()) blocks = r.blocks;
    watch.profiled(o.name(), k + 1, options.size(), batch_shape(config, real_tokens), r.activation_peak_bytes,
                   r.step_ms);
    reports[{o.codec, o.recompute, o.bf16_products}] = std::move(r);
  }
  return reports;
}

// Appends `options`' columns to p (its blocks, exact_ms set) from their reports.
void add_columns(MemoryProfile& p, const std::vector<KeepOption>& options, const Reports& reports) {
  const std::vector<std::string>& blocks = p.blocks;
  const size_t n = blocks.size();
  p.kept.resize(n);
  p.working.resize(n);
  p.keeps_own.resize(n);
  p.keeps_inner.resize(n);
  for (const KeepOption& opt : options) {
    const MemoryReport& r = reports.at({opt.codec, opt.recompute, opt.bf16_products});
    // Recomputation and codecs cannot make a step faster: a negative difference is noise. A
    // strategy's can (HOT's backward is lighter).
    const double added = (r.step_ms - p.exact_ms) / static_cast<double>(std::max<size_t>(1, n));
    p.added_ms.push_back(opt.strategy.empty() ? std::max(0.0, added) : added);
    int64_t kept_at_peak = 0;
    if (r.peak_site)
      for (const auto& e : r.peak_site->kept) kept_at_peak += e.bytes;
    p.in_flight.push_back(std::max<int64_t>(0, r.activation_peak_bytes - kept_at_peak));
    // What the block keeps unrecomputed under the same codec and strategy: from this profile
    // set, or from the columns already in p (recomputation in bf16 is profiled on its own).
    const auto unrecomputed = reports.find({opt.codec, false, false});
    size_t u = p.options.size();
    if (unrecomputed == reports.end()) {
      for (u = 0; u < p.options.size(); ++u)
        if (p.options[u].codec == opt.codec && !p.options[u].recompute && p.options[u].strategy == opt.strategy) break;
      LB_CHECK(u < p.options.size(), "internal: no profile of ", opt.codec, " without recomputation");
    }
    for (size_t b = 0; b < n; ++b) {
      const auto keeps = [&](const MemoryReport& x, bool own) {
        return std::any_of(x.entries.begin(), x.entries.end(), [&](const auto& e) {
          return own ? e.module == blocks[b] : under(e.module, blocks[b]) && e.module != blocks[b];
        });
      };
      p.keeps_own[b].push_back(keeps(r, true));
      // A recomputed block's submodules keep in its recomputation what they keep without it.
      const bool here = unrecomputed != reports.end();
      p.keeps_inner[b].push_back(here ? keeps(unrecomputed->second, false) : p.keeps_inner[b][u]);
      const int64_t kept = bytes_under(r.entries, blocks[b]);
      p.kept[b].push_back(kept);
      // A recomputed block holds its input and, while backward runs through it, its
      // activations made again (kept as the codec keeps them).
      const int64_t again = here ? bytes_under(unrecomputed->second.entries, blocks[b]) : p.kept[b][u];
      p.working[b].push_back(kept + (opt.recompute ? again : 0));
    }
    p.options.push_back(opt);
  }
}

}  // namespace

MemoryProfile profile_memory(const Config& config_in, const std::string& strategy, int64_t real_tokens,
                             const PlanWatch& watch, int timed_steps) {
  const Config config = worst_case_batch(config_in, real_tokens);
  MemoryProfile p;
  const std::vector<KeepOption> options = block_options();
  const Reports reports = profile_options(config, strategy, options, p.blocks, real_tokens, watch, timed_steps);
  p.tokens = static_cast<double>(real_tokens > 0 ? real_tokens
                                                 : config.data.batch_size * std::max<int64_t>(1, config.data.max_seq_len));
  const MemoryReport& exact = reports.at({"f32", false, false});
  p.exact_ms = exact.step_ms;
  p.exact_peak = exact.activation_peak_bytes;
  add_columns(p, options, reports);
  p.rest.assign(rest_codecs().size(), 0);
  for (size_t c = 0; c < rest_codecs().size(); ++c) {
    const MemoryReport& r = reports.at({rest_codecs()[c], false, false});
    int64_t in_blocks = 0;
    for (const auto& b : p.blocks) in_blocks += bytes_under(r.entries, b);
    p.rest[c] = r.saved_bytes - in_blocks;
  }
  return p;
}

bool bf16_recompute_offered(const Config& config) {
  return backend::bf16_products_faster() && config.train.precision == "f32";
}

void profile_bf16_recompute(MemoryProfile& p, const Config& config_in, const std::string& strategy, int64_t real_tokens,
                            const PlanWatch& watch, int timed_steps) {
  const Config config = worst_case_batch(config_in, real_tokens);
  const std::vector<KeepOption> options = {bf16_recompute_option()};
  std::vector<std::string> blocks = p.blocks;
  add_columns(p, options, profile_options(config, strategy, options, blocks, real_tokens, watch, timed_steps));
}

void retime(MemoryProfile& p, const MemoryProfile& from) {
  const double share = p.tokens / std::max(1.0, from.tokens);
  p.exact_ms = from.exact_ms * share;
  for (size_t o = 0; o < p.options.size(); ++o)
    for (size_t f = 0; f < from.options.size(); ++f)
      if (from.options[f].name() == p.options[o].name()) p.added_ms[o] = from.added_ms[f] * share;
}

void profile_strategy(MemoryProfile& p, const Config& config_in, const std::string& strategy,
                      const std::string& candidate, const PlanWatch& watch, StrategyColumns which) {
  const Config config = with_backward_rules(worst_case_batch(config_in), strategy_rules(p.blocks, candidate));
  std::vector<KeepOption> options;
  for (const KeepOption& o : block_options(candidate))
    if (which == StrategyColumns::All || (o.codec == "int8") == (which == StrategyColumns::Leanest))
      options.push_back(o);
  std::vector<std::string> blocks = p.blocks;
  add_columns(p, options, profile_options(config, strategy, options, blocks, 0, watch));
}

}  // namespace lb::train
