// Per-op accounting: every byte the tape keeps, attributed to (module, op, role), sums to
// autograd::saved_bytes(); the activation peak counts all but model and optimizer state;
// leanback plan --memory's report on a small BERT.
#include <gtest/gtest.h>

#include <set>

#include "lb/autograd/node.h"
#include "lb/autograd/peak_watch.h"
#include "lb/autograd/saved_breakdown.h"
#include "lb/core/allocator.h"
#include "lb/nn/layers.h"
#include "lb/ops.h"
#include "lb/train/config.h"
#include "lb/train/memory/memory_report.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb {
namespace {

int64_t sum_bytes(const std::vector<autograd::SavedEntry>& entries) {
  int64_t n = 0;
  for (const auto& e : entries) n += e.bytes;
  return n;
}

TEST(ModulePath, FollowsRegistrationAtAnyDepth) {
  auto block = std::make_shared<nn::Container>("Block");
  auto fc = block->add("fc", std::make_shared<nn::Linear>(3, 2));
  EXPECT_EQ(fc->path(), "fc");
  auto model = std::make_shared<nn::Container>("Model");
  model->add("layer", std::make_shared<nn::ModuleList>())->push_back(block);  // registered later
  EXPECT_EQ(fc->path(), "layer.0.fc");
  EXPECT_EQ(model->path(), "");
  for (auto& [name, m] : model->named_modules()) EXPECT_EQ(m->path(), name);
}

TEST(SavedBreakdown, AttributesEveryKeptStorageOnceToModuleOpAndRole) {
  auto model = std::make_shared<nn::Container>("Model");
  auto fc1 = model->add("fc1", std::make_shared<nn::Linear>(6, 8));
  auto fc2 = model->add("fc2", std::make_shared<nn::Linear>(8, 3));
  const Tensor x = testing::randn({4, 6}, 1, DType::F32);
  const Tensor y = fc2->forward(gelu(fc1->forward(x)));  // gelu outside any module
  const auto entries = autograd::saved_breakdown();
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(sum_bytes(entries), autograd::saved_bytes());
  std::set<std::string> modules;
  for (const auto& e : entries) {
    modules.insert(e.module);
    EXPECT_GT(e.bytes, 0);
    EXPECT_FALSE(e.op.empty());
  }
  // fc1 keeps x for g_w (its input), counted under fc1; the parameters are never counted.
  bool x_at_fc1 = false;
  for (const auto& e : entries)
    x_at_fc1 = x_at_fc1 || (e.module == "fc1" && e.role == "input" && e.bytes == 4 * 6 * 4 && e.shape == x.shape());
  EXPECT_TRUE(x_at_fc1);
  // fc2 keeps nothing of its own (exact lean): gelu's kept input gives fc2's input back.
  EXPECT_FALSE(modules.count("fc2"));
  EXPECT_TRUE(modules.count(""));  // gelu's kept tensor
  for (const auto& e : entries) EXPECT_TRUE(e.module == "fc1" || e.module.empty()) << e.module;
}

TEST(ActivationPeak, CountsAllButModelAndOptimizerState) {
  Allocator& a = cpu_allocator();
  const int64_t before = a.stats().activation_current;
  a.reset_activation_peak();
  {
    const Tensor grad = Tensor::empty({4096}, DType::F32, Device::cpu(), MemTag::Gradient);
    const Tensor opt = Tensor::empty({4096}, DType::F32, Device::cpu(), MemTag::Optimizer);
    EXPECT_EQ(a.stats().activation_peak, before);  // model and optimizer state: not activations
    Tensor act = Tensor::empty({1024}, DType::F32, Device::cpu(), MemTag::Other);
    const Tensor work = Tensor::empty({512}, DType::F32, Device::cpu(), MemTag::Workspace);
    const MemStats m = a.stats();
    EXPECT_EQ(m.activation_current, before + 4096 + 2048);
    EXPECT_EQ(m.activation_peak, before + 4096 + 2048);
    EXPECT_EQ(m.at_activation_peak[static_cast<int>(MemTag::Workspace)], m.current[static_cast<int>(MemTag::Workspace)]);
    // Kept for backward (Other -> Saved): still activation memory, the counter unchanged.
    a.retag(4096, MemTag::Other, MemTag::Saved);
    EXPECT_EQ(a.stats().activation_current, before + 4096 + 2048);
    a.retag(4096, MemTag::Saved, MemTag::Other);
  }
  const MemStats m = a.stats();
  EXPECT_EQ(m.activation_current, before);
  EXPECT_EQ(m.activation_peak, before + 4096 + 2048);  // the peak stays until reset
  a.reset_activation_peak();
  EXPECT_EQ(a.stats().activation_peak, before);
}

// A node whose backward allocates `temp` floats before returning its input's gradient (and
// keeps `kept`, if defined).
Tensor spike(const std::string& name, const Tensor& x, const Tensor& kept, int64_t temp) {
  Tensor out = Tensor::zeros(x.shape(), DType::F32, Device::cpu());
  std::vector<Tensor> saved;
  if (kept.defined()) saved.push_back(kept);
  autograd::record(name, out, {x}, saved,
                   [temp](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
                     const Tensor t = Tensor::zeros({temp}, DType::F32, Device::cpu());
                     return std::vector<Tensor>{g.clone()};
                   });
  return out;
}

// The watch names the node whose backward set the peak and what was kept then: a node frees
// what it kept as soon as backward has applied it, so the kept copy of a later node (applied
// first) is gone by the time the earlier node's backward allocates its large temporary.
TEST(PeakWatch, NamesTheNodeThatSetThePeakAndWhatWasKeptThen) {
  Allocator& a = cpu_allocator();
  Tensor x = testing::randn({256}, 1, DType::F32);
  x.set_requires_grad();
  Tensor y;
  {
    const Tensor small = Tensor::zeros({1024}, DType::F32, Device::cpu());
    const Tensor large = Tensor::zeros({64 * 1024}, DType::F32, Device::cpu());
    y = spike("late", spike("early", x, small, 256 * 1024), large, 1);
  }
  a.reset_activation_peak();
  const int64_t before = a.stats().activation_current;
  autograd::PeakWatch watch(a);
  sum(y).backward();
  watch.check("after");
  ASSERT_TRUE(watch.site().has_value());
  const autograd::PeakSite& site = *watch.site();
  EXPECT_EQ(site.phase, "backward");
  EXPECT_EQ(site.op, "early");
  EXPECT_EQ(site.activation_bytes, a.stats().activation_peak);
  // Kept then: only "early"'s own 4 KiB; "late"'s 256 KiB was freed when it was applied, so the
  // peak holds the 1 MiB temporary, not both.
  ASSERT_EQ(site.kept.size(), 1u);
  EXPECT_EQ(site.kept[0].op, "early");
  EXPECT_EQ(site.kept[0].bytes, 1024 * 4);
  // Above what was live before backward (both kept copies): the 1 MiB temporary, less the
  // 256 KiB "late" freed, plus gradients of 1 KiB.
  EXPECT_LT(site.activation_bytes - before, 256 * 1024 * 4);
  EXPECT_GE(site.activation_bytes - before, 256 * 1024 * 4 - 64 * 1024 * 4);
}

TEST(PeakWatch, NotesAForwardPeakAtTheRecordingNodeAndLaterRisesByPhase) {
  Allocator& a = cpu_allocator();
  Tensor x = testing::randn({256}, 2, DType::F32);
  x.set_requires_grad();
  a.reset_activation_peak();
  autograd::PeakWatch watch(a);
  const Tensor y = spike("forward_op", x, Tensor::zeros({128 * 1024}, DType::F32, Device::cpu()), 1);
  ASSERT_TRUE(watch.site().has_value());
  EXPECT_EQ(watch.site()->phase, "forward");
  EXPECT_EQ(watch.site()->op, "forward_op");
  watch.check("later");  // no rise since: the site stays
  EXPECT_EQ(watch.site()->phase, "forward");
  const Tensor big = Tensor::zeros({1024 * 1024}, DType::F32, Device::cpu());
  watch.check("later");
  EXPECT_EQ(watch.site()->phase, "later");
  EXPECT_TRUE(watch.site()->op.empty());
}

// leanback plan --memory on a small BERT: the kept tensors sum to saved_bytes(), each module
// of the model shows up, and the step's activation peak is at least what the forward kept.
TEST(MemoryReport, SmallBertStepIsAttributedInFull) {
  for (const char* strategy : {"", "instant", "hot"}) {
    train::Config c = train::Config::from_json(testing::tiny_bert_config(4), "tiny.json");
    const train::MemoryReport r = train::memory_report(c, strategy);
    ASSERT_FALSE(r.entries.empty()) << strategy;
    EXPECT_EQ(sum_bytes(r.entries), r.saved_bytes) << strategy;
    EXPECT_GT(r.saved_bytes, 0) << strategy;
    EXPECT_GE(r.activation_peak_bytes, r.saved_bytes) << strategy;
    bool attention = false, ffn = false;
    for (const auto& e : r.entries) {
      attention = attention || e.module.find("attention.self") != std::string::npos;
      ffn = ffn || e.op == "gelu";  // the FFN's GELU input (its Linears may keep nothing of their own)
    }
    EXPECT_TRUE(attention && ffn) << strategy;
    const nlohmann::json j = r.to_json();
    int64_t by_op = 0, by_module = 0;
    for (const auto& g : j["by_op"]) by_op += g["bytes"].get<int64_t>();
    for (const auto& g : j["by_module"]) by_module += g["bytes"].get<int64_t>();
    EXPECT_EQ(by_op, r.saved_bytes);
    EXPECT_EQ(by_module, r.saved_bytes);
    EXPECT_NE(r.table().find("activation peak over the step"), std::string::npos);
    // Where the peak was set, and what was kept then (never more than the peak).
    ASSERT_TRUE(r.peak_site.has_value()) << strategy;
    EXPECT_EQ(r.peak_site->activation_bytes, r.activation_peak_bytes) << strategy;
    EXPECT_LE(sum_bytes(r.peak_site->kept), r.activation_peak_bytes) << strategy;
    EXPECT_EQ(j["activation_peak_site"]["kept_bytes"].get<int64_t>(), sum_bytes(r.peak_site->kept));
    EXPECT_NE(r.table().find("kept at the peak"), std::string::npos);
    // The whole step by category: AdamW's f32 moments twice the parameters; the peak holds the
    // parameters with what the forward kept, and with their gradients and the moments at the
    // update; the process holds more than the allocator.
    const int64_t params = r.step_peak_by_tag[static_cast<int>(MemTag::Parameter)];
    EXPECT_GT(params, 0);
    EXPECT_EQ(r.step_peak_by_tag[static_cast<int>(MemTag::Optimizer)], 2 * params) << strategy;
    EXPECT_GE(r.step_peak_bytes, params + r.saved_bytes) << strategy;
    EXPECT_GE(r.step_peak_bytes, 4 * params) << strategy;
    EXPECT_GT(r.process.rss_bytes, r.step_peak_bytes);
    EXPECT_EQ(j["step_peak_by_tag"]["optimizer"].get<int64_t>(), 2 * params);
    EXPECT_NE(r.table().find("whole step's peak"), std::string::npos);
  }
}

}  // namespace
}  // namespace lb
