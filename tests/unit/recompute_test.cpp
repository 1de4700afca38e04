// Recomputation (lb/autograd/recompute.h, lb/nn/recomputable_block.h): BERT (padded and
// padding-free), ViT and ResNet with every block recomputed give the same loss and the same
// gradients bit for bit as without — dropout on, so the recomputation must draw the same
// masks — keep fewer bytes on the tape, leave the random stream and BatchNorm's running
// statistics where one forward leaves them; with the op alone, x's gradient flows on to x's
// producer; a product nothing reads is skipped; an input a LayerNorm gives back costs no
// bytes. Recomputed in bf16 (memory.recompute_bf16): the same loss and random stream,
// gradients close to but not equal to exact ones, exact again inside ExactRecomputeScope.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "lb/autograd/node.h"
#include "lb/autograd/recompute.h"
#include "lb/core/random.h"
#include "lb/nn/recomputable_block.h"
#include "lb/ops.h"
#include "models/bert.h"
#include "models/resnet.h"
#include "models/vit.h"
#include "testing/testing.h"

namespace lb {
namespace {

Tensor labels_of(int64_t n) {  // 0, 1, 2, 0, ...
  Tensor t = Tensor::zeros({n}, DType::I64);
  for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = i % 3;
  return t;
}

struct Pass {
  double loss = 0;
  int64_t saved = 0;
  uint64_t rng_offset = 0;
  std::map<std::string, std::vector<double>> grads, buffers;
};

// Builds a model with fixed weights, sets every block to recompute or not, runs one training
// forward + backward from a fixed generator position.
template <typename M, typename Forward>
Pass run(const std::function<std::shared_ptr<M>()>& build, bool recompute, Forward&& forward, bool bf16 = false) {
  manual_seed(5);
  std::shared_ptr<M> m = build();
  int64_t blocks = 0;
  for (const auto& [name, mod] : m->named_modules()) {
    blocks += mod->set_recompute(recompute);
    if (auto* b = dynamic_cast<nn::RecomputableBlock*>(mod)) b->set_recompute_bf16(bf16);
  }
  EXPECT_GT(blocks, 1);
  m->train();
  manual_seed(9);
  Pass p;
  const int64_t before = autograd::saved_bytes();
  const Tensor loss = forward(*m);
  p.saved = autograd::saved_bytes() - before;
  p.loss = loss.item_double();
  loss.backward();
  p.rng_offset = default_generator().offset();
  for (const auto& [n, t] : m->named_parameters()) p.grads[n] = t.grad().to_double_vector();
  for (const auto& [n, t] : m->named_buffers()) p.buffers[n] = t.to_double_vector();
  return p;
}

template <typename M, typename Forward>
void expect_same(const std::function<std::shared_ptr<M>()>& build, Forward&& forward, const char* what) {
  const Pass plain = run<M>(build, false, forward), re = run<M>(build, true, forward);
  EXPECT_EQ(re.loss, plain.loss) << what;
  EXPECT_EQ(re.rng_offset, plain.rng_offset) << what;
  EXPECT_EQ(re.buffers, plain.buffers) << what << ": running statistics updated once";
  ASSERT_EQ(re.grads.size(), plain.grads.size());
  for (const auto& [n, g] : plain.grads) EXPECT_EQ(re.grads.at(n), g) << what << " " << n;
  EXPECT_LT(re.saved, plain.saved / 2) << what;
}

TEST(Recompute, BertGradientsEqualBitForBit) {
  models::BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = 16;
  c.num_labels = 3;
  const int64_t B = 4, T = 12;
  PhiloxStream rng(3);
  Tensor ids = Tensor::zeros({B, T}, DType::I64), keep = Tensor::zeros({B, T}, DType::I64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T - 2 * b; ++t) {  // right padding of 0, 2, 4, 6 tokens
      ids.data<int64_t>()[b * T + t] = 1 + static_cast<int64_t>(rng.next_u32() % 49);
      keep.data<int64_t>()[b * T + t] = 1;
    }
  const Tensor labels = labels_of(B);
  for (const bool skip_padding : {false, true}) {
    const std::function<std::shared_ptr<models::BertForSequenceClassification>()> build = [&] {
      auto m = std::make_shared<models::BertForSequenceClassification>(c);
      m->set_skip_padding(skip_padding);
      return m;
    };
    expect_same(build, [&](models::BertForSequenceClassification& m) { return m.forward(ids, Tensor(), keep, labels).loss; },
                skip_padding ? "bert padding-free" : "bert padded");
  }
}

// A two-layer ViT with dropout (hidden size `hidden`, MLP 2x), its fixed images and labels.
struct TinyVit {
  models::ViTConfig c;
  Tensor pixels = testing::randn({4, 3, 8, 8}, 1, DType::F32);
  Tensor labels = labels_of(4);
  explicit TinyVit(int64_t hidden) {
    c.image_size = 8;
    c.patch_size = 4;
    c.hidden_size = hidden;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 2 * hidden;
    c.hidden_dropout_prob = 0.1;
    c.attention_probs_dropout_prob = 0.1;
    c.num_labels = 3;
  }
  std::function<std::shared_ptr<models::ViTForImageClassification>()> build() const {
    return [c = c] { return std::make_shared<models::ViTForImageClassification>(c); };
  }
};

TEST(Recompute, VitGradientsEqualBitForBit) {
  const TinyVit v(16);
  const Tensor pixels = v.pixels, labels = v.labels;
  const auto build = v.build();
  expect_same(build, [&](models::ViTForImageClassification& m) { return m.forward(pixels, labels).loss; }, "vit");
}

TEST(Recompute, ResNetGradientsAndRunningStatisticsEqualBitForBit) {
  models::ResNetConfig c;
  c.cifar_stem = true;
  c.base_width = 4;
  c.num_classes = 3;
  const Tensor images = testing::randn({4, 3, 8, 8}, 2, DType::F32);
  const Tensor labels = labels_of(4);
  const std::function<std::shared_ptr<models::ResNet>()> build = [&] { return std::make_shared<models::ResNet>(c); };
  expect_same(build, [&](models::ResNet& m) { return m.forward(images, labels).loss; }, "resnet");
}

// The second forward on bf16 products: the first forward (loss, random stream) untouched, the
// gradients those of slightly different activations — close (cosine over 0.999 per tensor)
// but not equal — and under ExactRecomputeScope (the probe's reference) equal again.
TEST(Recompute, InBf16GradientsAreCloseAndExactInTheExactScope) {
  const TinyVit v(32);
  const Tensor pixels = v.pixels, labels = v.labels;
  const auto build = v.build();
  const auto forward = [&](models::ViTForImageClassification& m) { return m.forward(pixels, labels).loss; };
  const Pass plain = run<models::ViTForImageClassification>(build, false, forward);
  const Pass bf16 = run<models::ViTForImageClassification>(build, true, forward, true);
  EXPECT_EQ(bf16.loss, plain.loss);
  EXPECT_EQ(bf16.rng_offset, plain.rng_offset);
  EXPECT_LT(bf16.saved, plain.saved / 2);
  // Per tensor, where the gradient is not zero up to rounding (the key biases' is: softmax
  // ignores a shift shared by a row's scores).
  double largest = 0;
  for (const auto& [n, g] : plain.grads)
    for (double v : g) largest = std::max(largest, std::abs(v));
  int differ = 0;
  for (const auto& [n, g] : plain.grads) {
    const std::vector<double>& h = bf16.grads.at(n);
    ASSERT_EQ(h.size(), g.size()) << n;
    double dot = 0, gg = 0, hh = 0, top = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      dot += g[i] * h[i];
      gg += g[i] * g[i];
      hh += h[i] * h[i];
      top = std::max(top, std::abs(g[i]));
    }
    if (top > 1e-4 * largest) EXPECT_GT(dot / std::sqrt(gg * hh), 0.999) << n;
    differ += h != g;
  }
  EXPECT_GT(differ, 0) << "bf16 products changed no gradient";
  Pass exact;
  {
    const autograd::ExactRecomputeScope scope;
    exact = run<models::ViTForImageClassification>(build, true, forward, true);
  }
  for (const auto& [n, g] : plain.grads) EXPECT_EQ(exact.grads.at(n), g) << n;
}

TEST(Recompute, TheOpKeepsOnlyItsInputAndPassesItsGradientOn) {
  Tensor a = testing::randn({64}, 4, DType::F64).set_requires_grad(true);
  Tensor w = testing::randn({64}, 5, DType::F64).set_requires_grad(true);
  const auto block = [w](const Tensor& x) { return tanh(mul(exp(x), w)); };
  const Tensor x = mul_scalar(a, 3.0);  // x has a producer: its gradient must reach a
  const int64_t before = autograd::saved_bytes();
  const Tensor y = autograd::recompute_in_backward(block, x);
  EXPECT_EQ(autograd::saved_bytes() - before, 64 * 8);  // x alone (w is a leaf kept by no node)
  sum(y).backward();
  const auto ga = a.grad().to_double_vector(), gw = w.grad().to_double_vector();
  const auto av = a.to_double_vector(), wv = w.to_double_vector();
  for (size_t i = 0; i < av.size(); ++i) {
    const double e = std::exp(3 * av[i]), t = std::tanh(e * wv[i]);
    EXPECT_NEAR(gw[i], (1 - t * t) * e, 1e-12);
    EXPECT_NEAR(ga[i], (1 - t * t) * wv[i] * e * 3, 1e-12);
  }
  EXPECT_FALSE(autograd::recomputing());
}

// A block ending in a product nothing reads (UnreadValuesScope): its first forward computes
// it, its recomputation does not (zeros), and every gradient is that of the plain block.
TEST(Recompute, TheUnreadLastProductIsSkippedAndTheGradientsStayExact) {
  Tensor w1 = testing::randn({6, 4}, 6, DType::F64).set_requires_grad(true);
  Tensor w2 = testing::randn({4, 6}, 7, DType::F64).set_requires_grad(true);
  Tensor b2 = testing::randn({4}, 8, DType::F64).set_requires_grad(true);
  std::vector<std::vector<double>> outputs;  // the last product's values, per forward
  const auto block = [w1, w2, b2, &outputs](const Tensor& x) {
    const Tensor h = gelu(linear(x, w1));
    const autograd::UnreadValuesScope unread;
    const Tensor y = linear(h, w2, b2);
    outputs.push_back(y.to_double_vector());
    return add(x, y);
  };
  const auto grads = [&](bool recompute) {
    for (Tensor* t : {&w1, &w2, &b2}) t->zero_grad();
    Tensor a = testing::randn({3, 5, 4}, 9, DType::F64).set_requires_grad(true);
    const Tensor x = mul_scalar(a, 2.0);
    const Tensor y = recompute ? autograd::recompute_in_backward(block, x) : block(x);
    sum(mul(y, y)).backward();
    return std::vector<std::vector<double>>{a.grad().to_double_vector(), w1.grad().to_double_vector(),
                                            w2.grad().to_double_vector(), b2.grad().to_double_vector()};
  };
  const auto plain = grads(false);
  outputs.clear();
  const auto re = grads(true);
  EXPECT_EQ(re, plain);
  ASSERT_EQ(outputs.size(), 2u);  // the first forward, the recomputation
  EXPECT_TRUE(std::any_of(outputs[0].begin(), outputs[0].end(), [](double v) { return v != 0; }));
  EXPECT_TRUE(std::all_of(outputs[1].begin(), outputs[1].end(), [](double v) { return v == 0; }))
      << "the recomputation ran the product nothing reads";
  EXPECT_FALSE(autograd::values_unread());
}

// Where the block's input is a LayerNorm's output, the recomputation keeps what the LayerNorm
// keeps (its input and statistics) and makes the block's input again from it: no new bytes.
TEST(Recompute, AnInputItsProducerGivesBackCostsNoBytes) {
  Tensor a = testing::randn({3, 8}, 10, DType::F64).set_requires_grad(true);
  Tensor w = testing::randn({8}, 11, DType::F64).set_requires_grad(true);
  const Tensor gamma = testing::randn({8}, 12, DType::F64), beta = testing::randn({8}, 13, DType::F64);
  const auto block = [w](const Tensor& x) { return tanh(mul(x, w)); };
  const auto grads = [&](bool recompute, int64_t* added) {
    a.zero_grad();
    w.zero_grad();
    const Tensor x = layer_norm(a, gamma, beta);
    const int64_t before = autograd::saved_bytes();
    const Tensor y = recompute ? autograd::recompute_in_backward(block, x) : block(x);
    *added = autograd::saved_bytes() - before;
    sum(mul(y, y)).backward();
    return std::vector<std::vector<double>>{a.grad().to_double_vector(), w.grad().to_double_vector()};
  };
  int64_t plain_added = 0, re_added = 0;
  const auto plain = grads(false, &plain_added);
  const auto re = grads(true, &re_added);
  EXPECT_EQ(re, plain);
  EXPECT_GT(plain_added, 0);
  EXPECT_EQ(re_added, 0);
}

// The block's input gradient is an activation gradient: the inner backward delivers it to a
// leaf, but it must not be accounted as a model gradient (the activation peak excludes those).
TEST(Recompute, TheInputGradientCountsAsActivationMemory) {
  Tensor a = testing::randn({64}, 4, DType::F32).set_requires_grad(true);
  Tensor w = testing::randn({64}, 5, DType::F32).set_requires_grad(true);
  const auto block = [w](const Tensor& x) { return tanh(mul(x, w)); };
  Tensor x = mul_scalar(a.detach(), 3.0);
  MemTag seen = MemTag::Gradient;
  int calls = 0;
  autograd::record("probe", x, {a}, {}, [&](const Tensor& g, std::vector<Tensor>&, const std::vector<bool>&) {
    seen = g.storage()->tag();
    ++calls;
    return std::vector<Tensor>{mul_scalar(g, 3.0)};
  });
  sum(autograd::recompute_in_backward(block, x)).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, MemTag::Other);
  EXPECT_EQ(w.grad().storage()->tag(), MemTag::Gradient);  // the block's parameters' are the model's
  EXPECT_EQ(a.grad().storage()->tag(), MemTag::Gradient);
}

// ... and from the moment its first part arrives: a block that also passes its input on (a
// residual) hands the inner backward's leaf that part before the rest of the block's backward
// runs, which is where a block's backward peaks.
TEST(Recompute, TheInputGradientIsActivationMemoryWhileTheBlocksBackwardRuns) {
  Tensor a = testing::randn({64}, 6, DType::F32).set_requires_grad(true);
  Tensor w = testing::randn({64}, 7, DType::F32).set_requires_grad(true);
  const auto gradient_bytes = [] { return cpu_allocator().stats().current[static_cast<int>(MemTag::Gradient)]; };
  const int64_t before = gradient_bytes();
  int64_t during = -1;
  const auto block = [w, &during, gradient_bytes, before](const Tensor& x) {
    Tensor t = mul(x, w);
    Tensor probed = t.detach();  // a node between mul and tanh that reads the gradient bytes
    if (autograd::should_record({t}))
      autograd::record("probe", probed, {t}, {},
                       [&during, gradient_bytes, before](const Tensor& g, std::vector<Tensor>&, const std::vector<bool>&) {
                         during = gradient_bytes() - before;
                         return std::vector<Tensor>{g};
                       });
    return add(tanh(probed), x);
  };
  Tensor x = mul_scalar(a.detach(), 3.0);
  autograd::record("to a", x, {a}, {}, [](const Tensor& g, std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{mul_scalar(g, 3.0)};
  });
  sum(autograd::recompute_in_backward(block, x)).backward();
  // By the probe, the residual's part of the block's input gradient has been delivered; w's
  // and a's gradients are still to come.
  EXPECT_EQ(during, 0);
  EXPECT_EQ(gradient_bytes() - before, 2 * 64 * 4);  // then w's and a's
}

}  // namespace
}  // namespace lb
