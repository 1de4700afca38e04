// A training run's parts (see training_setup.h).
#include "src/train/training_setup.h"

#include <algorithm>
#include <cmath>

#include "lb/core/error.h"
#include "lb/core/random.h"
#include "lb/nn/recomputable_block.h"

namespace lb::train {

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, nn::Module& model) {
  const OptimizerSection& o = c.optimizer;
  const auto named = model.named_parameters();
  auto groups = optim::param_groups_with_decay(named, o.lr, o.weight_decay, o.no_decay);
  if (o.type == "sgd") {
    optim::SgdOptions s;
    s.momentum = o.momentum;
    s.nesterov = o.nesterov;
    return std::make_unique<optim::SGD>(std::move(groups), s);
  }
  optim::AdamOptions a;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  a.decoupled = o.type == "adamw";
  a.state_bits = static_cast<int>(o.state_bits);
  return std::make_unique<optim::Adam>(std::move(groups), a);
}

optim::LrSchedule make_schedule(const ScheduleSection& s, int64_t total_steps) {
  optim::LrSchedule sch;
  sch.kind = s.type == "linear"   ? optim::ScheduleKind::Linear
             : s.type == "cosine" ? optim::ScheduleKind::Cosine
                                  : optim::ScheduleKind::Constant;
  sch.total_steps = total_steps;
  sch.warmup_steps = s.warmup_steps > 0
                         ? s.warmup_steps
                         : static_cast<int64_t>(std::ceil(s.warmup_ratio * static_cast<double>(total_steps)));
  if (sch.kind != optim::ScheduleKind::Constant)
    sch.warmup_steps = std::min(sch.warmup_steps, std::max<int64_t>(total_steps - 1, 0));
  sch.min_ratio = s.min_ratio;
  return sch;
}

}  // namespace

Config resolved_for_training(Config config) {
  // Padding: dynamic by default. BERT runs padding-free unless told not to: token-wise layers
  // see only the kept tokens, and INSTANT's token-axis projections work per sequence
  // (CallContext::sequences).
  if (config.data.padding == "auto") config.data.padding = "dynamic";
  if (config.model.type == "bert" && config.model.skip_padding == "auto") config.model.skip_padding = "true";
  return config;
}

TrainingSetup set_up_training(const Config& config, const std::string& strategy, Device device,
                              const dist::ProcessGroup& pg) {
  const TrainSection& tc = config.train;
  const int64_t world = pg.size();
  TrainingSetup s;
  manual_seed(tc.seed);
  s.data = load_task_data(config);
  s.model = build_task_model(config, s.data.num_labels, s.data.vocab_size, &s.load_log);
  nn::Module& module = s.model->module();
  for (const auto& g : config.freeze) {
    try {
      module.freeze(g);
    } catch (const Error& e) {
      throw Error(config.source + ": freeze: " + e.what());
    }
  }
  // A codec rule whose module glob matches no module is a typo (rules whose op or role keep
  // nothing are caught after the first forward, TrainStep).
  for (size_t i = 0; i < config.memory.codecs.size(); ++i) {
    const std::string& glob = config.memory.codecs[i].match;
    bool found = false;
    for (const auto& [name, m] : module.named_modules()) found = found || glob_match(glob, name);
    LB_CHECK(found, config.source, ": memory.codecs[", i, "].match '", glob, "' matches no module of this ",
             config.model.type, " model (module names look like '", module.named_modules().back().first, "')");
  }
  // memory.recompute, then memory.recompute_bf16 (the same, its second forward in bf16).
  for (const bool bf16 : {false, true}) {
    const std::vector<std::string>& globs = bf16 ? config.memory.recompute_bf16 : config.memory.recompute;
    for (size_t i = 0; i < globs.size(); ++i) {
      const std::string& glob = globs[i];
      int64_t blocks = 0;
      std::vector<std::string> names;  // the model's blocks, for the message
      for (const auto& [name, m] : module.named_modules()) {
        auto* block = dynamic_cast<nn::RecomputableBlock*>(m);
        if (block == nullptr) continue;
        names.push_back("'" + name + "'");
        if (!glob_match(glob, name) || !block->set_recompute(true)) continue;
        if (bf16) block->set_recompute_bf16(true);
        ++blocks;
      }
      if (names.size() > 3) names = {names.front(), names[1], "...", names.back()};
      std::string listed;
      for (const auto& n : names) listed += (listed.empty() ? "" : ", ") + n;
      LB_CHECK(blocks > 0, config.source, ": memory.", bf16 ? "recompute_bf16" : "recompute", "[", i, "] '", glob,
               "' matches no block of this ", config.model.type, " model (blocks: ", listed.empty() ? "none" : listed,
               ")");
    }
  }
  try {
    s.plan = config.backward.plan(module, strategy);
  } catch (const Error& e) {
    throw Error(config.source + ": " + e.what());
  }
  LB_CHECK(config.data.padding != "auto" && (config.model.type != "bert" || config.model.skip_padding != "auto"),
           config.source, ": set_up_training needs a resolved config (resolved_for_training)");
  // INSTANT's token-axis bases span max_seq_len positions and each sequence (or padded batch)
  // of L tokens projects with their first L columns (set_max_tokens, below).
  if (config.model.type == "bert") s.model->set_skip_padding(config.model.skip_padding == "true");
  s.strategies = config.backward.apply(module, strategy);
  if (s.data.text)
    for (const auto& st : s.strategies)
      if (auto* c = st->calibration()) c->set_max_tokens(config.data.max_seq_len);
  if (!device.is_cpu()) {
    for (const auto& st : s.strategies)
      LB_CHECK(!st->cpu_only(st->record().conv), "--device ", device.str(), ": layer ", st->record().name, " uses ",
               st->type(), ", whose ", st->record().conv ? "Conv2d" : "Linear",
               " kernels run on the CPU only so far. HINT: --strategy vanilla");
    s.model->to(device);  // before the optimizer takes the parameters
  }
  LB_CHECK(world == 1 || tc.grad_probe_every == 0, config.source,
           ": train.grad_probe_every is not supported with data-parallel training yet (run the probe "
           "with one process)");
  s.optimizer = make_optimizer(config, module);
  const auto params = module.parameters();
  LB_CHECK(std::any_of(params.begin(), params.end(), [](const Tensor& p) { return p.requires_grad(); }), config.source, ": freeze: every parameter is frozen; nothing to train");

  s.train_loader = make_loader(s.data, config, /*train_split=*/true, tc.seed, pg.rank(), world);
  s.calib_loader = make_loader(s.data, config, true, tc.seed ^ 0x5ca1ab1eULL, pg.rank(), world);
  s.eval_loader = make_loader(s.data, config, /*train_split=*/false, tc.seed);
  s.batches = s.train_loader->batches_per_epoch();
  s.steps_per_epoch = (s.batches + tc.grad_accum - 1) / tc.grad_accum;
  s.total_steps = tc.max_steps > 0 ? tc.max_steps
                                   : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(
                                                              tc.epochs * static_cast<double>(s.steps_per_epoch))));
  s.schedule = make_schedule(config.schedule, s.total_steps);
  s.eval_every = tc.eval_every > 0 ? tc.eval_every : s.steps_per_epoch;
  return s;
}

TrainStepOptions train_step_options(const Config& config, const TrainingSetup& s, dist::ProcessGroup& pg,
                                    const Device& device, double previous_grad_norm) {
  TrainStepOptions o;
  o.max_grad_norm = config.train.max_grad_norm;
  o.optimizer_in_backward = config.optimizer.in_backward;
  o.previous_grad_norm = previous_grad_norm;
  o.schedule = &s.schedule;
  o.group = &pg;
  o.device = device;
  o.strategies = s.strategies;
  // HOT's stochastic-rounding streams: keyed by rank too (rank 0 keeps the single-process key).
  o.seed = config.train.seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(pg.rank()));
  if (!config.memory.codecs.empty()) o.codecs = std::make_shared<autograd::CodecRules>(config.memory.codecs);
  return o;
}

}  // namespace lb::train
