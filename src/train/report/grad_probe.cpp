// The gradient-fidelity probe (see grad_probe.h).
#include "lb/train/report/grad_probe.h"

#include <cmath>
#include <map>
#include <string>

#include "lb/core/error.h"
#include "lb/nn/backward/probe.h"
#include "lb/nn/layers.h"
#include "lb/nn/recomputable_block.h"

namespace lb::train {

namespace {

// <e, a>, |e|², |a|², |e - a|² of two gradients as cosine similarity and relative error.
nlohmann::json closeness(double dot, double ee, double aa, double dd) {
  return {{"cos", ee > 0 && aa > 0 ? dot / std::sqrt(ee * aa) : 0.0}, {"rel_err", ee > 0 ? std::sqrt(dd / ee) : 0.0}};
}

}  // namespace

// The gradient-fidelity probe (train.grad_probe_every) on one held training batch, in eval
// mode (no dropout draws, BatchNorm statistics untouched), with every compressed layer (with
// codecs or blocks recomputed in bf16: every layer) wrapped in a ProbedStrategy
// (nn/backward/probe.h), which draws from the probe's own stream. Pass 1, without the
// kept-tensor codecs and with exact recomputation, compares each layer's g_w and g_x with the
// exact ones from the same (exact) g_y ("local") and passes the exact ones on; pass 2 runs the
// ordinary backward (compressed strategies, codecs), whose g_w and g_x are compared with pass
// 1's exact ones ("end to end"). Training is unchanged by it: its draws, the strategies' state
// and figures are as before.
nlohmann::json run_grad_probe(TaskModel& model, TrainStep& train_step,
                              const std::vector<std::shared_ptr<nn::backward::Strategy>>& strategies,
                              data::BatchSource& loader, int64_t step) {
  train_step.begin_step(step);  // the probe's draws: this step's probe stream
  nn::Module& module = train_step.module();
  std::map<std::string, nn::Module*> modules;
  for (auto& [name, m] : module.named_modules()) modules[name] = m;
  // The compressed layers, with their modules (a strategy not set on a layer is not probed);
  // with kept-tensor codecs every layer, vanilla ones too (the codecs make them lossy).
  bool codecs = train_step.has_codecs();
  for (const auto& [name, m] : module.named_modules()) {  // recomputation in bf16 is lossy as codecs are
    const auto* block = dynamic_cast<const nn::RecomputableBlock*>(m);
    codecs = codecs || (block != nullptr && block->recomputes_bf16());
  }
  std::vector<std::pair<std::shared_ptr<nn::backward::Strategy>, nn::Module*>> probed;
  for (const auto& s : strategies)
    if (s->type() != "vanilla" || codecs)
      if (const auto it = modules.find(s->record().name); it != modules.end() && nn::backward_strategy_of(*it->second) == s)
        probed.emplace_back(s, it->second);
  nlohmann::json out = nlohmann::json::array();
  if (probed.empty()) return out;
  data::Batch held;
  loader.start_epoch(0, 0);
  LB_CHECK(loader.next(held), "gradient probe: no training batch");
  const bool was_training = module.is_training();
  // Eval mode everywhere but in the layers with strategies (they use them in training mode
  // only): no dropout draws, BatchNorm's statistics untouched.
  module.eval();
  for (const auto& s : strategies)
    if (const auto it = modules.find(s->record().name); it != modules.end()) it->second->train(true);
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : module.named_parameters()) params[name] = p;
  const auto weight_grad = [&](const std::string& layer) {
    auto it = params.find(layer + ".weight");
    return it != params.end() && it->second.grad().defined() ? it->second.grad().clone() : Tensor();
  };
  const std::vector<data::Batch> batch{held};
  const auto forward_backward = [&](bool with_codecs) {
    train_step.accumulate(micro_batches(model, batch), "gradient probe", with_codecs);
  };
  std::vector<std::shared_ptr<nn::backward::ProbedStrategy>> wrapped;
  const auto unwrap = [&] {
    for (size_t i = 0; i < wrapped.size(); ++i) {
      nn::set_backward_strategy(*probed[i].second, probed[i].first);
      wrapped[i]->end();
    }
  };
  std::vector<Tensor> exact_gw;
  try {
    for (const auto& [s, m] : probed) {
      wrapped.push_back(std::make_shared<nn::backward::ProbedStrategy>(s));
      nn::set_backward_strategy(*m, wrapped.back());
    }
    forward_backward(false);  // the exact reference: kept tensors as they are
    for (const auto& [s, m] : probed) exact_gw.push_back(weight_grad(s->record().name));
    train_step.optimizer().zero_grad();
    for (const auto& w : wrapped) w->set_comparing(false);
    forward_backward(true);  // the run's backward: strategies and codecs
  } catch (...) {
    unwrap();
    if (was_training) module.train();
    throw;
  }
  unwrap();
  for (size_t i = 0; i < probed.size(); ++i) {
    const auto& st = wrapped[i]->stats();
    const auto& s = probed[i].first;
    nlohmann::json l = {{"layer", s->record().name}, {"type", s->type()}};
    if (st.calls == 0) {
      l["probed"] = false;  // exact this step (not calibrated yet, fell back, frozen)
      out.push_back(l);
      continue;
    }
    if (s->type() != "vanilla") {  // a vanilla layer's own backward is exact (cosine 1)
      if (st.gw_ee > 0) l["local"]["g_w"] = closeness(st.gw_dot, st.gw_ee, st.gw_aa, st.gw_dd);
      if (st.gx_ee > 0) l["local"]["g_x"] = closeness(st.gx_dot, st.gx_ee, st.gx_aa, st.gx_dd);
    }
    if (st.e2e_gx_ee > 0) l["end_to_end"]["g_x"] = closeness(st.e2e_gx_dot, st.e2e_gx_ee, st.e2e_gx_aa, st.e2e_gx_dd);
    const Tensor approx = weight_grad(s->record().name);
    if (exact_gw[i].defined() && approx.defined()) {
      double dot = 0, ee = 0, aa = 0, dd = 0;
      nn::backward::add_closeness(exact_gw[i], approx, dot, ee, aa, dd);
      l["end_to_end"]["g_w"] = closeness(dot, ee, aa, dd);
    }
    out.push_back(l);
  }
  train_step.optimizer().zero_grad();
  if (was_training) module.train();
  return out;
}

}  // namespace lb::train
