// Accounting report over a model's strategies.
#include "lb/nn/backward/accounting.h"

#include "lb/autograd/node.h"
#include "lb/core/allocator.h"
#include "lb/nn/backward/summary.h"

namespace lb::nn::backward {

PaperTotals paper_totals_last_call(const std::vector<std::shared_ptr<Strategy>>& strategies) {
  PaperTotals t;
  for (const auto& s : strategies) {
    const LayerGeometry& g = s->record().measured.last_geom;
    t.backward_flops += s->paper_backward_flops_as_run(g) * static_cast<double>(g.B);
    t.saved_bytes_fp32 += s->paper_saved_bytes_fp32_as_run(g) * static_cast<double>(g.B);
  }
  return t;
}

nlohmann::json accounting_report(const std::vector<std::shared_ptr<Strategy>>& strategies) {
  nlohmann::json layers = nlohmann::json::array();
  double mflops = 0, mib = 0, ms = 0;
  int64_t kept = 0;
  for (const auto& s : strategies) {
    const StrategySummary sum = s->summary();
    mflops += sum.paper.backward_flops / 1e6;
    mib += sum.paper.saved_bytes_fp32 / (1024.0 * 1024.0);
    ms += sum.measured.backward_ms_total;
    kept += sum.measured.saved_bytes_last_call;
    layers.push_back(s->report());
  }
  const MemStats m = cpu_allocator().stats();
  nlohmann::json by_tag = nlohmann::json::object();
  for (int i = 0; i < kNumMemTags; ++i)
    by_tag[mem_tag_name(static_cast<MemTag>(i))] = {{"current", m.current[i]}, {"peak", m.peak[i]}};
  return {{"layers", layers},
          {"total",
           {{"layers", strategies.size()},
            {"paper_backward_mflops_per_sample", mflops},
            {"paper_saved_mib_fp32_per_sample", mib},
            {"measured_saved_bytes_last_call", kept},
            {"measured_backward_ms_total", ms}}},
          {"memory",
           {{"tape_saved_bytes_now", autograd::saved_bytes()},
            {"cpu_current", m.total_current},
            {"cpu_peak", m.total_peak},
            {"by_tag", by_tag}}}};
}

}  // namespace lb::nn::backward
