// Trains a Linear layer a few steps with HOT's backward through the installed headers and
// library; prints "consumer ok" when the loss went down.
#include <cstdio>

#include "lb/core/random.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/layers.h"
#include "lb/ops.h"
#include "lb/optim/optimizer.h"
#include "models/bert.h"

int main() {
  lb::manual_seed(1);
  lb::nn::Linear lin(16, 4);
  lin.set_backward(lb::nn::backward::make_strategy({{"type", "hot"}}, "consumer"));
  lb::optim::Adam opt(lb::optim::single_group(lin.named_parameters(), 1e-2));
  const lb::Tensor x = lb::rand_normal({8, 32, 16}, lb::default_generator());
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    lb::Tensor loss = lb::mean(lb::mul(lin.forward(x), lin.forward(x)));
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item_double();
  }
  lb::models::BertConfig cfg;  // the models' headers are installed too
  std::printf("loss %.4f -> %.4f, bert hidden %lld\n", first, last, static_cast<long long>(cfg.hidden_size));
  if (!(last < first)) return 1;
  std::printf("consumer ok\n");
  return 0;
}
