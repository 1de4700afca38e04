// An evaluation during training (see eval_step.h).
#include "src/train/eval_step.h"

#include <iomanip>
#include <sstream>

#include "lb/train/evaluate.h"

namespace lb::train {

EvalAtStep evaluate_at_step(TaskModel& model, data::BatchSource& loader, const TaskData& data,
                            int64_t steps_per_epoch, TrainerState& st, MetricsLog& metrics, const Logger& log,
                            bool bar) {
  PhaseProgress progress("evaluation at step " + std::to_string(st.step), bar, log.quiet());
  EvalOutput ev = evaluate(model, loader, data, /*keep_logits=*/false, &progress);
  EvalAtStep r;
  r.line = ev.metrics;
  r.line["type"] = "eval";
  r.line["step"] = st.step;
  r.line["epoch"] = static_cast<double>(st.step) / static_cast<double>(steps_per_epoch);
  metrics.write(r.line);
  const std::string key = "eval_" + data.primary_metric();
  if (ev.metrics.contains(key)) {
    const double v = ev.metrics[key].get<double>();
    if (v > st.best_metric || st.best_step < 0) {
      st.best_metric = v;
      st.best_eval = r.line;
      r.best = true;
    }
  }
  std::ostringstream os;
  os << "eval step " << st.step << ":";
  for (auto& [k, v] : ev.metrics.items())
    if (k != "eval_samples" && k != "eval_runtime_s" && k != "eval_samples_per_second")
      os << " " << k << " " << std::setprecision(4) << v.get<double>();
  os << (r.best ? " (best)" : "");
  log.info(os.str());
  return r;
}

}  // namespace lb::train
