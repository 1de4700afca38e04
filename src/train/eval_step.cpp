// An evaluation during training (see eval_step.h).
#include "src/train/eval_step.h"

#include <iomanip>
#include <sstream>

#include "lb/train/evaluate.h"

namespace lb::train {

EvalAtStep evaluate_at_step(TaskModel& model, data::BatchSource& loader, const TaskData& data,
                            int64_t steps_per_epoch, TrainerState& st, MetricsLog& metrics, const Logger& log,
                            bool bar, int64_t patience) {
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
  st.evals_since_best = r.best ? 0 : st.evals_since_best + 1;
  std::ostringstream os;
  os << "eval step " << st.step << ":";
  for (auto& [k, v] : ev.metrics.items())
    if (k != "eval_samples" && k != "eval_runtime_s" && k != "eval_samples_per_second")
      os << " " << k << " " << std::setprecision(4) << v.get<double>();
  os << (r.best ? " (best)" : "");
  log.info(os.str());
  if (patience > 0 && st.evals_since_best >= patience) {
    st.stopped_early = true;
    const std::string why = key + " has not improved on " + std::to_string(st.best_metric) + " (step " +
                            std::to_string(st.best_step) + ") in " + std::to_string(patience) + " evaluation" +
                            (patience > 1 ? "s" : "") + " (train.early_stopping_patience)";
    log.info("early stopping at step " + std::to_string(st.step) + ": " + why);
    metrics.write({{"type", "early_stopping"}, {"step", st.step}, {"best_step", st.best_step}, {"reason", why}});
  }
  return r;
}

}  // namespace lb::train
