// evaluate (see evaluate.h).
#include "lb/train/evaluate.h"

#include <chrono>

#include "lb/autograd/grad_mode.h"
#include "lb/core/error.h"

namespace lb::train {

EvalOutput evaluate(TaskModel& model, data::BatchSource& source, const TaskData& task,
                    bool keep_logits, PhaseProgress* progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool was_training = model.module().is_training();
  model.module().eval();
  NoGradGuard no_grad;
  EvalOutput out;
  double loss_sum = 0;
  int64_t n = 0;
  bool labeled = false;
  source.start_epoch(0);
  const int64_t batches = source.batches_per_epoch();
  int64_t done = 0;
  data::Batch b;
  while (source.next(b)) {
    if (progress) progress->update("batches", done++, batches);
    const ModelOutput o = model.forward(b);
    const Tensor logits = o.logits.to(Device::cpu()).contiguous().to(DType::F32);
    const int64_t B = b.size(), C = logits.size(1);
    const float* pl = logits.data<float>();
    if (o.loss.defined()) {
      labeled = true;
      loss_sum += o.loss.item_double() * static_cast<double>(B);
      const auto g = b.labels.to_double_vector();
      out.gold.insert(out.gold.end(), g.begin(), g.end());
    }
    for (int64_t i = 0; i < B; ++i) {
      const float* row = pl + i * C;
      double pred = row[0];
      if (!task.regression) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; ++c)
          if (row[c] > row[best]) best = c;
        pred = static_cast<double>(best);
      }
      out.predictions.push_back(pred);
      out.positions.push_back(b.indices[i]);
      if (keep_logits) out.logits.emplace_back(row, row + C);
    }
    n += B;
  }
  if (progress) {
    progress->update("batches", done, batches);
    progress->finish();
  }
  if (was_training) model.module().train();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.metrics = nlohmann::json::object();
  if (labeled && n > 0) {
    out.metrics["eval_loss"] = loss_sum / static_cast<double>(n);
    const nlohmann::json scores = task.score(out.predictions, out.gold);  // (items() of a temporary dangles)
    for (auto it = scores.begin(); it != scores.end(); ++it) out.metrics["eval_" + it.key()] = *it;
  }
  out.metrics["eval_samples"] = n;
  out.metrics["eval_runtime_s"] = secs;
  out.metrics["eval_samples_per_second"] = secs > 0 ? static_cast<double>(n) / secs : 0.0;
  return out;
}

}  // namespace lb::train
