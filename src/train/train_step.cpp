// One training step (see train_step.h).
#include "lb/train/train_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "lb/autograd/node.h"
#include "lb/autograd/recompute.h"
#include "lb/core/cuda_runtime_info.h"
#include "lb/core/storage.h"
#include "lb/nn/backward/accounting.h"
#include "lb/ops/elementwise.h"
#include "src/train/data_parallel.h"

namespace lb::train {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

TrainStep::TrainStep(nn::Module& module, optim::Optimizer& optimizer, TrainStepOptions options)
    : module_(module),
      optimizer_(optimizer),
      opt_(std::move(options)),
      context_(std::make_shared<nn::backward::StepContext>(nn::backward::StepContext{opt_.seed, 0, 0})),
      previous_grad_norm_(opt_.previous_grad_norm) {
  for (const auto& p : module_.parameters())
    if (p.requires_grad()) trainable_.push_back(p);
  for (const auto& s : opt_.strategies) s->record().step_context = context_;
}

void TrainStep::wait_for_device() const {
  if (opt_.synchronize && opt_.device.is_cuda()) cuda_synchronize(opt_.device.index);
}

// Data-parallel: each rank weights its micro-batches by their share of the global batch.
int64_t TrainStep::global_examples(const std::vector<MicroBatch>& micro, const std::string& what) {
  int64_t n = 0;
  for (const auto& m : micro) n += m.examples;
  if (opt_.group && opt_.group->size() > 1) {
    std::vector<double> v{static_cast<double>(n)};
    opt_.group->all_reduce_sum(v, what);
    n = static_cast<int64_t>(v[0]);
  }
  return n;
}

void TrainStep::accumulate(const std::vector<MicroBatch>& micro, const std::string& what, bool with_codecs) {
  const autograd::SavedCodecScope codecs(with_codecs ? opt_.codecs : nullptr, opt_.seed, context_->step,
                                         context_->stream);
  std::optional<autograd::ExactRecomputeScope> exact;  // without codecs, recomputation exact too
  if (!with_codecs) exact.emplace();
  const double examples = static_cast<double>(global_examples(micro, what));
  for (const auto& m : micro) {
    if (m.examples == 0) continue;
    const double share = static_cast<double>(m.examples) / examples;
    const Tensor loss = m.loss();
    (share == 1.0 ? loss : loss * share).backward();
  }
}

StepResult TrainStep::run(int64_t step, const std::vector<MicroBatch>& micro, bool measure_saved) {
  begin_step(step);
  const autograd::SavedCodecScope codecs(opt_.codecs, opt_.seed, step, nn::backward::kTrainingStream);
  Allocator& allocator = allocator_for(opt_.device);
  allocator.reset_activation_peak();
  StepResult r;
  const std::string at = "step " + std::to_string(step + 1);
  r.examples = global_examples(micro, "example count of " + at);
  const double examples = static_cast<double>(r.examples);
  const bool parallel = opt_.group && opt_.group->size() > 1;
  const bool fused = opt_.optimizer_in_backward;
  LB_CHECK(!(fused && parallel), "optimizer.in_backward: one rank only (the gradients must be all-reduced before "
           "the update); this run has ", opt_.group ? opt_.group->size() : 1);
  if (fused) {  // the rate is set before backward, which applies it
    if (opt_.schedule) optimizer_.set_lr_factor(opt_.schedule->factor(step));
    r.lr = optimizer_.groups().front().lr;
    optimizer_.begin_step();
  }
  // Fused: embedding weight gradients stay rows over every micro-batch of the step.
  pending_rows_.clear();
  struct RowsSink {
    explicit RowsSink(TrainStep* s) {
      if (s)
        autograd::set_row_sparse_grad_sink([s](const TensorImpl* leaf, autograd::RowSparseGrad g) {
          if (!s->optimizer_.takes_rows(leaf)) return false;
          auto& pending = s->pending_rows_[leaf];
          pending = autograd::add_row_sparse(pending, g);
          return true;
        });
    }
    ~RowsSink() { autograd::set_row_sparse_grad_sink({}); }
  } rows_sink(fused ? this : nullptr);
  // Data-parallel: the last backward pass of the step starts the buckets' all-reduces as their
  // gradients complete (GradientSync::arm), overlapping the rest of the backward.
  size_t last_nonempty = micro.size();
  for (size_t m = 0; m < micro.size(); ++m)
    if (micro[m].examples > 0) last_nonempty = m;
  for (size_t m = 0; m < micro.size(); ++m) {
    if (micro[m].examples == 0) continue;
    const auto f0 = Clock::now();
    Tensor loss = micro[m].loss();
    wait_for_device();
    const auto f1 = Clock::now();
    if (m == 0 && measure_saved) {  // untimed: walks the live graph
      r.saved_bytes = autograd::saved_bytes();
      // The papers' accounting at this batch's geometry (per example, as they report it).
      const auto paper = nn::backward::paper_totals_last_call(opt_.strategies);
      const double ex = static_cast<double>(micro[m].examples);
      r.paper_flops_per_example = paper.backward_flops / ex;
      r.paper_saved_bytes_per_example = paper.saved_bytes_fp32 / ex;
    }
    const double l = loss.item_double();
    if (!std::isfinite(l))
      throw Diverged(at + ": the training loss is " + number(l) + " (micro-batch " + std::to_string(m) + ")");
    const double share = static_cast<double>(micro[m].examples) / examples;
    r.loss += l * share;
    const auto f2 = Clock::now();
    if (parallel && opt_.sync && m == last_nonempty) opt_.sync->arm();
    if (fused && m == last_nonempty) backward_with_fused_update(share == 1.0 ? loss : loss * share, at, r);
    else (share == 1.0 ? loss : loss * share).backward();
    loss = Tensor();  // the graph is freed by backward; drop the last handle too
    if (!codecs_checked_) {  // after backward: recomputed blocks record their tensors there
      check_codec_rules();
      codecs_checked_ = true;
    }
    wait_for_device();
    const auto f3 = Clock::now();
    r.forward_ms += ms_between(f0, f1);
    r.backward_ms += ms_between(f2, f3);
  }
  if (parallel) {  // the global batch's gradient and loss on every rank
    const auto s0 = Clock::now();
    if (opt_.sync) opt_.sync->finish();  // what the overlap did not hide
    std::vector<double> v{r.loss};
    opt_.group->all_reduce_sum(v, "loss of " + at);
    r.loss = v[0];
    r.sync_ms = ms_between(s0, Clock::now());
  }
  if (fused) {  // updated in backward
    const MemStats mem = allocator.stats();
    r.activation_peak_bytes = mem.activation_peak;
    r.at_activation_peak = mem.at_activation_peak;
    r.step_peak_bytes = mem.step_peak;
    return r;
  }
  const auto o0 = Clock::now();
  if (opt_.max_grad_norm) {
    const double max = *opt_.max_grad_norm > 0 ? *opt_.max_grad_norm : std::numeric_limits<double>::infinity();
    r.grad_norm = optim::clip_grad_norm(trainable_, max);
    if (!std::isfinite(r.grad_norm)) {
      const std::string bad = first_bad_gradient();
      throw Diverged(at + ": non-finite gradient norm " + number(r.grad_norm) +
                     (bad.empty() ? std::string("") : " (first in " + bad + ")"));
    }
  }
  if (opt_.schedule) optimizer_.set_lr_factor(opt_.schedule->factor(step));
  r.lr = optimizer_.groups().front().lr;
  optimizer_.step();
  optimizer_.zero_grad();
  wait_for_device();
  r.optimizer_ms = ms_between(o0, Clock::now());
  const MemStats mem = allocator.stats();
  r.activation_peak_bytes = mem.activation_peak;
  r.at_activation_peak = mem.at_activation_peak;
  r.step_peak_bytes = mem.step_peak;
  return r;
}

// The last backward pass of a fused step: the engine calls back as each leaf's gradient
// completes; a trainable parameter's is checked, counted into the step's norm, scaled by the
// previous step's clipping coefficient, applied and freed. A gradient that arrives for a
// parameter already updated (one used both inside a recomputed block and outside it) is an
// error rather than a second update.
void TrainStep::backward_with_fused_update(const Tensor& loss, const std::string& at, StepResult& r) {
  double coef = 1.0;
  if (opt_.max_grad_norm && *opt_.max_grad_norm > 0 && previous_grad_norm_ > 0)
    coef = std::min(1.0, *opt_.max_grad_norm / (previous_grad_norm_ + 1e-6));
  std::unordered_set<const TensorImpl*> updated;
  double sum_squares = 0;
  const auto apply = [&](const TensorImpl* leaf) {
    const std::string name = optimizer_.parameter_name(leaf);
    if (name.empty()) return;  // not a parameter (an input's gradient)
    Tensor g = leaf->grad;
    const auto rows_it = pending_rows_.find(leaf);
    autograd::RowSparseGrad rows;
    if (rows_it != pending_rows_.end()) {
      rows = std::move(rows_it->second);
      pending_rows_.erase(rows_it);
    }
    if (!g.defined() && !rows.defined()) return;
    LB_CHECK(updated.insert(leaf).second, "optimizer.in_backward: a second gradient for '", name,
             "' arrived after its update (a parameter used both inside a recomputed block and outside it); set "
             "optimizer.in_backward to false for this model");
    // Rows alone: norm, clipping and update on the rows (the other rows' zeros add nothing).
    Tensor& values = g.defined() ? g : rows.values;
    if (g.defined() && rows.defined()) autograd::add_row_sparse_into(g, rows);
    const double sq = optim::grad_sum_squares(values);
    if (!std::isfinite(sq))
      throw Diverged(at + ": non-finite gradient in " + name + " (optimizer.in_backward: the parameters updated "
                     "before it in this step are already changed)");
    sum_squares += sq;
    if (coef < 1.0) optim::scale_grad(values, coef);
    if (g.defined()) optimizer_.update_parameter(leaf);  // and frees the gradient (g's handle goes with this call)
    else optimizer_.update_parameter_rows(leaf, rows.rows, rows.values);
  };
  autograd::set_leaf_grad_ready_hook(apply);
  struct Unhook {
    ~Unhook() { autograd::set_leaf_grad_ready_hook({}); }
  } unhook;
  loss.backward();
  // A parameter this pass did not reach that earlier micro-batches gave a gradient: complete now.
  for (const Tensor& p : trainable_)
    if ((p.grad().defined() || pending_rows_.count(p.impl())) && !updated.count(p.impl())) apply(p.impl());
  // Rows left now came after their parameter's update: refused as a second dense gradient is.
  if (!pending_rows_.empty())
    LB_FAIL("optimizer.in_backward: a second gradient for '", optimizer_.parameter_name(pending_rows_.begin()->first),
            "' arrived after its update (a parameter used both inside a recomputed block and outside it); set "
            "optimizer.in_backward to false for this model");
  r.grad_norm = std::sqrt(sum_squares);
  previous_grad_norm_ = r.grad_norm;
}

void TrainStep::check_codec_rules() const {
  if (!opt_.codecs) return;
  const std::vector<int64_t> matches = opt_.codecs->matches();
  for (size_t i = 0; i < matches.size(); ++i) {
    const autograd::CodecRule& r = opt_.codecs->rules()[i];
    if (matches[i] > 0 || !r.must_match) continue;
    std::string ops;
    for (const auto& op : opt_.codecs->ops_seen()) ops += (ops.empty() ? "" : ", ") + op;
    throw Error("memory.codecs[" + std::to_string(i) + "] (match '" + r.match + "', op '" + r.op + "', role '" +
                r.role + "') decided no kept tensor in the first step (its forward and recomputations): an earlier " +
                "rule took them, or " +
                "nothing matches. Ops that kept activations: " + (ops.empty() ? "none" : ops) +
                "; roles: input, input1, ..., output");
  }
}

// The first parameter whose gradient holds a NaN/inf, as "name (layer L, backward strategy S)".
std::string TrainStep::first_bad_gradient() {
  for (const auto& [name, p] : module_.named_parameters()) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    const auto v = g.to_double_vector();
    if (std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); })) continue;
    for (const auto& s : opt_.strategies)
      if (name.rfind(s->record().name + ".", 0) == 0)
        return name + " (layer " + s->record().name + ", backward strategy " + s->type() + ")";
    return name;
  }
  return "";
}

}  // namespace lb::train
