// Module tree: dotted names, registration order, state dicts, freezing, train/eval, printing.
#include <gtest/gtest.h>

#include "lb/nn/module.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb::nn {
namespace {

class Leaf : public Module {
 public:
  explicit Leaf(int64_t n) {
    w_ = Tensor::ones({n, n});
    b_ = Tensor::zeros({n});
    stat_ = Tensor::zeros({n});
    register_parameter("weight", &w_);
    register_parameter("bias", &b_);
    register_buffer("running", &stat_);
  }
  std::string type_name() const override { return "Leaf"; }
  Tensor w_, b_, stat_;
};

class Tree : public Module {
 public:
  Tree() {
    emb = register_module("embeddings", std::make_shared<Leaf>(2));
    layers = register_module("layer", std::make_shared<ModuleList>());
    layers->push_back(std::make_shared<Leaf>(3));
    layers->push_back(std::make_shared<Leaf>(3));
  }
  std::string type_name() const override { return "Tree"; }
  std::shared_ptr<Leaf> emb;
  std::shared_ptr<ModuleList> layers;
};

TEST(Module, DottedNamesInOrder) {
  Tree t;
  std::vector<std::string> names;
  for (auto& [n, _] : t.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"embeddings.weight", "embeddings.bias",
                                             "layer.0.weight", "layer.0.bias", "layer.1.weight",
                                             "layer.1.bias"}));
  EXPECT_EQ(t.named_buffers().size(), 3u);
  EXPECT_EQ(t.state_dict().size(), 9u);
  EXPECT_EQ(t.num_parameters(), 4 + 2 + 2 * (9 + 3));
  EXPECT_EQ(t.named_modules().size(), 5u);  // root, embeddings, layer, layer.0, layer.1
  for (auto& [_, p] : t.named_parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_EQ(p.storage()->tag(), MemTag::Parameter);
  }
}

TEST(Module, FreezeByGlob) {
  Tree t;
  EXPECT_EQ(t.freeze("embeddings.*"), 2);
  EXPECT_EQ(t.num_parameters(true), 2 * (9 + 3));
  EXPECT_FALSE(t.emb->w_.requires_grad());
  EXPECT_EQ(t.freeze("layer.*.bias"), 2);
  EXPECT_THROW(t.freeze("encoder.*"), Error);
  EXPECT_EQ(t.unfreeze("*"), 6);
  EXPECT_TRUE(glob_match("a.*.c", "a.b.d.c"));
  EXPECT_FALSE(glob_match("a.?.c", "a.bb.c"));
}

TEST(Module, LoadStateDictReportsAndChecks) {
  Tree a, b;
  a.emb->w_.fill_(7);
  std::map<std::string, Tensor> dict;
  for (auto& [n, t] : a.state_dict()) dict[n] = t;
  b.load_state_dict(dict);
  EXPECT_EQ(b.emb->w_.to_double_vector(), std::vector<double>(4, 7.0));
  dict.erase("layer.1.bias");
  dict["extra.weight"] = Tensor::zeros({1});
  EXPECT_THROW(b.load_state_dict(dict), Error);
  const LoadReport r = b.load_state_dict(dict, /*strict=*/false);
  EXPECT_EQ(r.missing, (std::vector<std::string>{"layer.1.bias"}));
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"extra.weight"}));
  dict["layer.0.weight"] = Tensor::zeros({2, 2});
  try {
    b.load_state_dict(dict, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.0.weight"), std::string::npos);
  }
}

TEST(Module, TrainEvalRecursesAndTreePrints) {
  Tree t;
  t.eval();
  EXPECT_FALSE(t.layers->is_training());
  t.train();
  EXPECT_TRUE(t.emb->is_training());
  const std::string s = t.tree();
  EXPECT_NE(s.find("(layer): ModuleList"), std::string::npos) << s;
  EXPECT_NE(s.find("total parameters: 30"), std::string::npos) << s;
}

}  // namespace
}  // namespace lb::nn
