// The trainer's "train" lines (see step_log.h).
#include "src/train/run/step_log.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "lb/core/allocator.h"
#include "lb/core/process_memory.h"

namespace lb::train {

StepLog::StepLog(int64_t total_steps, int64_t steps_per_epoch, int64_t ranks, Device device)
    : total_steps_(total_steps), steps_per_epoch_(steps_per_epoch), ranks_(ranks), device_(device) {
  allocator_for(device_).reset_peak();
}

void StepLog::add(const StepResult& r, double step_ms, double data_ms) {
  win_.loss += r.loss;
  win_.grad_norm += r.grad_norm;
  win_.lr = r.lr;
  win_.step_ms += step_ms;
  win_.fwd += r.forward_ms;
  win_.bwd += r.backward_ms;
  win_.opt += r.optimizer_ms;
  win_.wait += data_ms;
  win_.examples += r.examples;
  win_.sync += r.sync_ms;
  if (r.saved_bytes >= 0) {
    win_.saved_sum += static_cast<double>(r.saved_bytes);
    win_.saved_max = std::max(win_.saved_max, r.saved_bytes);
    win_.paper_flops_sum += r.paper_flops_per_example;
    win_.paper_saved_sum += r.paper_saved_bytes_per_example;
  }
  if (r.activation_peak_bytes > win_.activation_peak) {
    win_.activation_peak = r.activation_peak_bytes;
    win_.at_activation_peak = r.at_activation_peak;
  }
  ++win_.steps;
}

void StepLog::flush(int64_t step, MetricsLog& metrics, Progress& progress) {
  const double n = static_cast<double>(win_.steps);
  const MemStats mem = allocator_for(device_).stats();
  const ProcessMemory proc = process_memory();
  nlohmann::json peak_by_tag;
  nlohmann::json at_activation_peak;
  for (int i = 0; i < kNumMemTags; ++i) {
    peak_by_tag[mem_tag_name(static_cast<MemTag>(i))] = mem.peak[i];
    if (is_activation_tag(static_cast<MemTag>(i)))
      at_activation_peak[mem_tag_name(static_cast<MemTag>(i))] = win_.at_activation_peak[i];
  }
  nlohmann::json line = {{"type", "train"},
                         {"step", step},
                         {"epoch", static_cast<double>(step) / static_cast<double>(steps_per_epoch_)},
                         {"loss", win_.loss / n},
                         {"lr", win_.lr},
                         {"grad_norm", win_.grad_norm / n},
                         {"step_ms", win_.step_ms / n},
                         {"forward_ms", win_.fwd / n},
                         {"backward_ms", win_.bwd / n},
                         {"optimizer_ms", win_.opt / n},
                         {"data_wait_ms", win_.wait / n},
                         {"allreduce_ms", win_.sync / n},
                         {"ranks", ranks_},
                         {"examples_per_s", static_cast<double>(win_.examples) / (win_.step_ms / 1000.0)},
                         {"saved_bytes", win_.saved_sum / n},
                         {"saved_bytes_max", win_.saved_max},
                         {"paper_backward_mflops_per_example", win_.paper_flops_sum / n / 1e6},
                         {"paper_saved_mib_fp32_per_example", win_.paper_saved_sum / n / (1024.0 * 1024.0)},
                         {"activation_peak_bytes", win_.activation_peak},
                         {"activation_peak_by_tag", at_activation_peak},
                         {"peak_bytes", mem.total_peak},
                         {"peak_bytes_by_tag", peak_by_tag},
                         {"allocator_cached_bytes", mem.cached},
                         {"process_rss_bytes", proc.rss_bytes},
                         {"process_max_rss_bytes", proc.max_rss_bytes}};
  run_peak_ = std::max(run_peak_, mem.total_peak);
  run_cached_ = std::max(run_cached_, mem.cached);
  for (int i = 0; i < kNumMemTags; ++i) run_peak_by_tag_[i] = std::max(run_peak_by_tag_[i], mem.peak[i]);
  metrics.write(line);
  std::ostringstream os;
  os << std::fixed << "step " << step << "/" << total_steps_ << " loss " << std::setprecision(4) << win_.loss / n
     << " lr " << std::scientific << std::setprecision(2) << win_.lr << std::fixed << " grad_norm "
     << std::setprecision(3) << win_.grad_norm / n << " " << std::setprecision(1) << win_.step_ms / n
     << " ms/step " << line["examples_per_s"].get<double>() << " ex/s saved "
     << win_.saved_sum / n / (1024.0 * 1024.0) << " MiB, activation peak "
     << static_cast<double>(win_.activation_peak) / (1024.0 * 1024.0) << " MiB, step peak "
     << static_cast<double>(mem.total_peak) / (1024.0 * 1024.0) << " MiB, RSS "
     << static_cast<double>(proc.rss_bytes) / (1024.0 * 1024.0) << " MiB";
  progress.log(os.str());
  win_ = Window{};
  allocator_for(device_).reset_peak();
}

nlohmann::json StepLog::memory_summary() const {
  nlohmann::json by_tag;
  for (int i = 0; i < kNumMemTags; ++i) by_tag[mem_tag_name(static_cast<MemTag>(i))] = run_peak_by_tag_[i];
  const ProcessMemory proc = process_memory();
  return {{"peak_bytes", run_peak_},
          {"peak_bytes_by_tag", by_tag},
          {"allocator_cached_bytes_max", run_cached_},
          {"process_max_rss_bytes", proc.max_rss_bytes}};
}

}  // namespace lb::train
