// leanback plan --memory: one attributed training step (see lb/train/memory/memory_report.h).
#include "lb/train/memory/memory_report.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <sstream>

#include "lb/autograd/node.h"
#include "lb/dist/process_group.h"
#include "lb/nn/backward/calibration.h"
#include "lb/nn/recomputable_block.h"
#include "lb/train/task_model.h"
#include "lb/train/train_step.h"
#include "src/train/training_setup.h"

namespace lb::train {

namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Bytes and tensor counts under each key, largest first.
struct Group {
  std::string key;
  int64_t bytes = 0, tensors = 0;
};
template <typename KeyFn>
std::vector<Group> group_by(const std::vector<autograd::SavedEntry>& entries, KeyFn key) {
  std::map<std::string, Group> groups;
  for (const auto& e : entries) {
    Group& g = groups[key(e)];
    g.key = key(e);
    g.bytes += e.bytes;
    ++g.tensors;
  }
  std::vector<Group> out;
  for (auto& [k, g] : groups) out.push_back(g);
  std::stable_sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return a.bytes > b.bytes; });
  return out;
}

std::string module_name(const autograd::SavedEntry& e) { return e.module.empty() ? "(model)" : e.module; }

nlohmann::json groups_json(const std::vector<Group>& groups, const char* key) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& g : groups) j.push_back({{key, g.key}, {"bytes", g.bytes}, {"tensors", g.tensors}});
  return j;
}

}  // namespace

std::string MemoryReport::table() const {
  std::ostringstream os;
  os << std::fixed;
  const auto print = [&](const std::vector<Group>& groups, const char* what, size_t width) {
    os << std::left << std::setw(static_cast<int>(width)) << what << std::right << std::setw(9) << "tensors"
       << std::setw(11) << "MiB" << std::setw(8) << "share\n";
    for (const auto& g : groups)
      os << std::left << std::setw(static_cast<int>(width)) << g.key << std::right << std::setw(9) << g.tensors
         << std::setw(11) << std::setprecision(2) << mib(g.bytes) << std::setw(7) << std::setprecision(1)
         << (saved_bytes > 0 ? 100.0 * static_cast<double>(g.bytes) / static_cast<double>(saved_bytes) : 0.0)
         << "%\n";
  };
  os << "kept for backward at the end of the forward (" << examples << " examples"
     << (strategy.empty() ? "" : ", --strategy " + strategy) << "), by op:\n";
  const auto by_op = group_by(entries, [](const autograd::SavedEntry& e) { return e.op; });
  print(by_op, "op", 28);
  os << "\nby op and role:\n";
  print(group_by(entries, [](const autograd::SavedEntry& e) { return e.op + " / " + e.role; }), "op / role", 36);
  os << "\nby module:\n";
  size_t width = 8;
  for (const auto& e : entries) width = std::max(width, module_name(e).size() + 2);
  print(group_by(entries, module_name), "module", width);
  os << "\ntotal kept: " << entries.size() << " tensors, " << std::setprecision(2) << mib(saved_bytes) << " MiB ("
     << saved_bytes << " bytes, autograd::saved_bytes())\n";
  os << "activation peak over the step: " << mib(activation_peak_bytes) << " MiB (";
  bool first = true;
  for (int i = 0; i < kNumMemTags; ++i)
    if (is_activation_tag(static_cast<MemTag>(i))) {
      os << (first ? "" : ", ") << mem_tag_name(static_cast<MemTag>(i)) << " " << mib(at_activation_peak[i]);
      first = false;
    }
  os << " MiB at that moment)\n";
  os << "whole step's peak: " << mib(step_peak_bytes) << " MiB (each category's own peak:";
  for (int i = 0; i < kNumMemTags; ++i)
    if (step_peak_by_tag[i] > 0) os << " " << mem_tag_name(static_cast<MemTag>(i)) << " " << mib(step_peak_by_tag[i]);
  os << " MiB); allocator cache " << mib(allocator_cached_bytes) << " MiB; process RSS " << mib(process.rss_bytes)
     << " MiB\n";
  if (peak_site) {
    const auto& p = *peak_site;
    int64_t kept = 0;
    for (const auto& e : p.kept) kept += e.bytes;
    os << "set " << (p.op.empty() ? p.phase : "in " + p.phase + " of " + p.op + " in " + (p.module.empty() ? "(model)" : p.module))
       << "; kept then: " << p.kept.size() << " tensors, " << std::setprecision(2) << mib(kept)
       << " MiB; the other " << mib(p.activation_bytes - kept) << " MiB: outputs and gradients in flight, temporaries\n";
    if (!p.kept.empty()) {
      os << "kept at the peak, by op and role:\n";
      const auto groups = group_by(p.kept, [](const autograd::SavedEntry& e) { return e.op + " / " + e.role; });
      os << std::left << std::setw(36) << "op / role" << std::right << std::setw(9) << "tensors" << std::setw(11) << "MiB\n";
      for (const auto& g : groups)
        os << std::left << std::setw(36) << g.key << std::right << std::setw(9) << g.tensors << std::setw(10)
           << std::setprecision(2) << mib(g.bytes) << "\n";
    }
  }
  return os.str();
}

nlohmann::json MemoryReport::to_json() const {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& e : entries)
    tensors.push_back({{"module", e.module},
                       {"op", e.op},
                       {"role", e.role},
                       {"bytes", e.bytes},
                       {"dtype", dtype_name(e.dtype)},
                       {"shape", e.shape}});
  nlohmann::json at_peak = nlohmann::json::object();
  for (int i = 0; i < kNumMemTags; ++i)
    if (is_activation_tag(static_cast<MemTag>(i))) at_peak[mem_tag_name(static_cast<MemTag>(i))] = at_activation_peak[i];
  nlohmann::json step_by_tag = nlohmann::json::object();
  for (int i = 0; i < kNumMemTags; ++i) step_by_tag[mem_tag_name(static_cast<MemTag>(i))] = step_peak_by_tag[i];
  nlohmann::json site = nullptr;
  if (peak_site) {
    const auto& p = *peak_site;
    int64_t kept = 0;
    for (const auto& e : p.kept) kept += e.bytes;
    site = {{"phase", p.phase},
            {"op", p.op},
            {"module", p.module},
            {"activation_bytes", p.activation_bytes},
            {"kept_bytes", kept},
            {"kept_by_op", groups_json(group_by(p.kept, [](const autograd::SavedEntry& e) { return e.op; }), "op")},
            {"kept_by_module", groups_json(group_by(p.kept, module_name), "module")}};
  }
  return {{"strategy", strategy.empty() ? nlohmann::json(nullptr) : nlohmann::json(strategy)},
          {"examples", examples},
          {"saved_bytes", saved_bytes},
          {"activation_peak_bytes", activation_peak_bytes},
          {"activation_peak_by_tag", at_peak},
          {"activation_peak_site", site},
          {"step_peak_bytes", step_peak_bytes},
          {"step_peak_by_tag", step_by_tag},
          {"steady_peak_bytes", steady_peak_bytes},
          {"allocator_cached_bytes", allocator_cached_bytes},
          {"process_rss_bytes", process.rss_bytes},
          {"process_max_rss_bytes", process.max_rss_bytes},
          {"by_op", groups_json(group_by(entries, [](const autograd::SavedEntry& e) { return e.op; }), "op")},
          {"by_module", groups_json(group_by(entries, module_name), "module")},
          {"tensors", tensors}};
}

namespace {

// Keeps `tokens` of the batch's (B, T) attention mask: rows filled whole in order, then one
// part-filled, every row keeping at least its first token.
void keep_tokens(data::Batch& batch, int64_t tokens, const std::string& source) {
  const auto it = batch.inputs.find("attention_mask");
  LB_CHECK(it != batch.inputs.end() && it->second.dim() == 2 && it->second.dtype() == DType::F32, source,
           ": a profile with a number of real tokens needs text batches");
  Tensor& mask = it->second;
  const int64_t rows = mask.size(0), len = mask.size(1);
  // A data set smaller than a batch gives fewer rows than data.batch_size: every batch of the
  // run has as few, so the whole of this one is the most any of them keeps.
  float* m = mask.data<float>();
  int64_t left = std::clamp<int64_t>(tokens, rows, rows * len);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t keep = std::clamp<int64_t>(left - (rows - 1 - r), 1, len);
    std::fill(m + r * len, m + r * len + keep, 1.0f);
    std::fill(m + r * len + keep, m + (r + 1) * len, 0.0f);
    left -= keep;
  }
}

}  // namespace

MemoryReport memory_report(const Config& requested, const std::string& strategy, int timed_steps, int64_t real_tokens,
                           bool steady_step) {
  dist::ProcessGroup& pg = dist::single_process();  // one process: the step as rank 0 of a run sees it
  cpu_allocator().reset_peak();  // run_peak_bytes: from what the caller holds
  const Config config = resolved_for_training(requested);
  TrainingSetup s = set_up_training(config, strategy, Device::cpu(), pg);
  TrainStep step(s.model->module(), *s.optimizer, train_step_options(config, s, pg, Device::cpu()));
  s.model->module().train();
  step.begin_step(0);
  // Calibration as training runs it before step 0 (INSTANT's bases, HOT's LQS), on the
  // calibration stream's first batches.
  nn::backward::Calibrator calibrator(s.strategies);
  int64_t next = 0;
  calibrator.calibrate(
      0,
      [&](int64_t) {
        data::Batch b;
        s.calib_loader->start_epoch(next / s.batches, next % s.batches);
        ++next;
        LB_CHECK(s.calib_loader->next(b), config.source, ": the calibration stream has no batch");
        step.accumulate(micro_batches(*s.model, {b}), "calibration");
      },
      [&] { s.optimizer->zero_grad(); });
  data::Batch batch;
  s.train_loader->start_epoch(0, 0);
  LB_CHECK(s.train_loader->next(batch), config.source, ": the training data has no batch");
  if (real_tokens > 0) keep_tokens(batch, real_tokens, config.source);
  MemoryReport r;
  r.strategy = strategy;
  r.examples = batch.size();
  // The attribution at the end of the forward, inside the step (its loss function).
  bool attributed = false;
  const std::vector<MicroBatch> micro{{batch.size(), [&] {
                                         Tensor loss = s.model->forward(batch).loss;
                                         if (!attributed) {
                                           r.entries = autograd::saved_breakdown();
                                           r.saved_bytes = autograd::saved_bytes();
                                           attributed = true;
                                         }
                                         return loss;
                                       }}};
  // Accumulating runs (train.grad_accum = k > 1, the planner's micro-batches): the attributed
  // step is the trainer's first, k micro-batches loaded before it runs them (their inputs are
  // live throughout), from the second on each parameter's gradient a temporary until added
  // into .grad (the first is adopted as .grad). The timed steps run the first alone.
  std::vector<data::Batch> more;
  for (int64_t i = 1; i < config.train.grad_accum; ++i) {
    data::Batch b;
    if (!s.train_loader->next(b)) break;
    if (real_tokens > 0) keep_tokens(b, real_tokens, config.source);
    more.push_back(std::move(b));
  }
  std::vector<MicroBatch> attributed_micro = micro;
  for (const MicroBatch& m : micro_batches(*s.model, more)) attributed_micro.push_back(m);
  StepResult result;
  r.run_peak_bytes = cpu_allocator().stats().total_peak;  // the set-up's
  {
    cpu_allocator().reset_peak();  // the step's own peak, from what the set-up left
    autograd::PeakWatch watch(cpu_allocator());
    result = step.run(0, attributed_micro, false);
    watch.check("after the backward (gradient clipping, optimizer step)");
    r.peak_site = watch.site();
    const MemStats m = cpu_allocator().stats();
    r.step_peak_bytes = m.total_peak;
    r.step_peak_by_tag = m.peak;
    r.run_peak_bytes = std::max(r.run_peak_bytes, r.step_peak_bytes);
    r.allocator_cached_bytes = m.cached;
    r.process = process_memory();
  }
  int64_t next_step = 1;
  if (steady_step) {
    cpu_allocator().reset_peak();
    step.run(next_step++, attributed_micro, false);
    const MemStats m = cpu_allocator().stats();
    r.steady_peak_bytes = m.total_peak;
    r.steady_peak_by_tag = m.peak;
    r.run_peak_bytes = std::max(r.run_peak_bytes, r.steady_peak_bytes);
  }
  std::vector<double> ms;
  for (int i = 0; i < timed_steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepResult t = step.run(next_step++, micro, false);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    r.timed.push_back({t.forward_ms, t.backward_ms, t.optimizer_ms, t.activation_peak_bytes, t.step_peak_bytes});
    r.run_peak_bytes = std::max(r.run_peak_bytes, t.step_peak_bytes);
  }
  // The fastest: another process's burst or a paused run only ever adds time, so the
  // minimum is the step's own cost (the median of two was their larger one, and one outlier
  // could change a plan).
  if (!ms.empty()) r.step_ms = *std::min_element(ms.begin(), ms.end());
  for (const auto& named : s.model->module().named_modules()) {
    const std::string& name = named.first;  // not a structured binding: clang cannot capture one
    if (dynamic_cast<nn::RecomputableBlock*>(named.second) == nullptr) continue;
    const bool inner = std::any_of(r.blocks.begin(), r.blocks.end(), [&](const std::string& b) {
      return name.size() > b.size() && name.compare(0, b.size() + 1, b + ".") == 0;
    });
    if (!inner) r.blocks.push_back(name);
  }
  r.activation_peak_bytes = result.activation_peak_bytes;
  r.at_activation_peak = result.at_activation_peak;
  return r;
}

}  // namespace lb::train
