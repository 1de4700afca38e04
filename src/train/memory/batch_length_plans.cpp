// BatchLengthPlans (see batch_length_plans.h).
#include "src/train/memory/batch_length_plans.h"

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
  ++steps_[index < 0 ? std::string("longest") : plan_.by_length[static_cast<size_t>(index)].label()];
  return index;
}

int BatchLengthPlans::put_in_force_for(const std::vector<data::Batch>& micro) {
  int64_t longest = 0, tokens = 0;  // over the micro-batches, each of which runs on its own
  for (const auto& b : micro) {
    const auto ids = b.inputs.find("input_ids");
    if (ids == b.inputs.end()) {  // no sequences: the longest batch's plan
      put_in_force(-1);
      return -1;
    }
    longest = std::max(longest, ids->second.size(1));
    const auto mask = b.inputs.find("attention_mask");
    int64_t kept = ids->second.numel();
    if (mask != b.inputs.end() && mask->second.dtype() == DType::F32 && mask->second.is_contiguous()) {
      const float* m = mask->second.data<float>();
      kept = std::count_if(m, m + mask->second.numel(), [](float v) { return v != 0.0f; });
    }
    tokens = std::max(tokens, kept);
  }
  const int index = plan_.length_plan_for(longest, tokens);
  put_in_force(index);
  return index;
}

void BatchLengthPlans::put_in_force(int index) {
  if (index == current_) return;
  step_.set_codecs(codecs_[static_cast<size_t>(index + 1)]);
  const MemorySection& section = plan_.section_for(index);
  const auto matches = [](const std::vector<std::string>& globs, const std::string& name) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return glob_match(g, name); });
  };
  for (const auto& [name, m] : module_.named_modules()) {
    auto* block = dynamic_cast<nn::RecomputableBlock*>(m);
    if (block == nullptr) continue;
    const bool bf16 = matches(section.recompute_bf16, name);
    block->set_recompute(bf16 || matches(section.recompute, name));
    block->set_recompute_bf16(bf16);
  }
  current_ = index;
}

}  // namespace lb::train
