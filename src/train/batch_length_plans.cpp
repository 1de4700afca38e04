// BatchLengthPlans (see batch_length_plans.h).
#include "src/train/batch_length_plans.h"

#include <algorithm>

#include "lb/core/glob.h"
#include "lb/nn/recomputable_block.h"

namespace lb::train {

BatchLengthPlans::BatchLengthPlans(const MemoryPlan& plan, nn::Module& module, TrainStep& step,
                                   std::shared_ptr<const autograd::CodecRules> longest_codecs)
    : plan_(plan), module_(module), step_(step) {
  codecs_.push_back(std::move(longest_codecs));
  for (const auto& l : plan.by_length)
    codecs_.push_back(l.section.codecs.empty() ? nullptr : std::make_shared<autograd::CodecRules>(l.section.codecs));
}

int BatchLengthPlans::apply(const std::vector<data::Batch>& micro) {
  const int index = put_in_force_for(micro);
  ++steps_[index < 0 ? 0 : plan_.by_length[static_cast<size_t>(index)].max_len];
  return index;
}

int BatchLengthPlans::put_in_force_for(const std::vector<data::Batch>& micro) {
  int64_t longest = 0;
  for (const auto& b : micro) {
    const auto it = b.inputs.find("input_ids");
    if (it == b.inputs.end()) {  // no sequences: the longest batch's plan
      longest = -1;
      break;
    }
    longest = std::max(longest, it->second.size(1));
  }
  const int index = longest < 0 ? -1 : plan_.length_plan_for(longest);
  put_in_force(index);
  return index;
}

void BatchLengthPlans::put_in_force(int index) {
  if (index == current_) return;
  step_.set_codecs(codecs_[static_cast<size_t>(index + 1)]);
  const std::vector<std::string>& recompute = plan_.section_for(index).recompute;
  for (const auto& named : module_.named_modules()) {
    const std::string& name = named.first;  // not a structured binding: clang cannot capture one
    if (dynamic_cast<nn::RecomputableBlock*>(named.second) == nullptr) continue;
    const bool on = std::any_of(recompute.begin(), recompute.end(), [&](const std::string& g) { return glob_match(g, name); });
    named.second->set_recompute(on);
  }
  current_ = index;
}

}  // namespace lb::train
