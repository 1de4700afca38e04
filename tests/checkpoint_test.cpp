// Checkpoints: round trip, exact resume, and clear errors for damaged checkpoints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lb/core/random.h"
#include "lb/io/safetensors.h"
#include "lb/nn/backward/accounting.h"
#include "lb/nn/backward/policy.h"
#include "lb/nn/layers.h"
#include "lb/train/checkpoint.h"
#include "testing/testing.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;

class Mlp : public nn::Module {
 public:
  Mlp() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 2));
  }
  std::string type_name() const override { return "Mlp"; }
  Tensor forward(const Tensor& x) { return fc2->forward(tanh(fc1->forward(x))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lb_ckpt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // One step of training on a batch drawn from the default generator (so RNG state matters).
  static double train_step(Mlp& m, optim::Optimizer& opt) {
    Tensor x = rand_normal({5, 4}, default_generator());
    opt.zero_grad();
    Tensor loss = mean(mul(m.forward(x), m.forward(x)));
    loss.backward();
    opt.step();
    return loss.item<float>();
  }
  fs::path dir_;
};

TEST_F(CheckpointTest, ResumeContinuesExactly) {
  manual_seed(7);
  Mlp a;
  optim::Adam opt_a(optim::single_group(a.named_parameters(), 1e-2));
  for (int i = 0; i < 3; ++i) train_step(a, opt_a);
  const optim::LrSchedule sched{optim::ScheduleKind::Linear, 1, 10, 0.0};
  save_checkpoint(dir_.string(), a, &opt_a, &sched, {{"note", "test"}});
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(train_step(a, opt_a));

  manual_seed(999);  // a different stream: the checkpoint must restore it
  Mlp b;
  optim::Adam opt_b(optim::single_group(b.named_parameters(), 1e-2));
  const LoadedCheckpoint ck = load_checkpoint(dir_.string(), b, &opt_b);
  EXPECT_EQ(ck.step, 3);
  EXPECT_EQ(ck.state["extra"]["note"], "test");
  EXPECT_EQ(ck.state["lr_schedule"]["type"], "linear");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(train_step(b, opt_b), expected[i]) << "step " << i;
  for (auto& [n, p] : a.named_parameters()) {
    const auto pb = b.state_dict();
    for (auto& [nb, tb] : pb)
      if (nb == n) EXPECT_EQ(tb.to_double_vector(), p.to_double_vector()) << n;
  }
}

TEST_F(CheckpointTest, DamagedCheckpointsGiveClearErrors) {
  Mlp a;
  save_checkpoint(dir_.string(), a, nullptr, nullptr);
  const std::string model_file = (dir_ / "model.safetensors").string();
  auto expect_error = [&](const std::string& needle) {
    Mlp b;
    try {
      load_checkpoint(dir_.string(), b, nullptr);
      ADD_FAILURE() << "no error; expected one mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Missing tensor.
  {
    auto weights = a.state_dict();
    weights.erase(weights.begin());
    io::save_safetensors(model_file, weights);
    expect_error("fc1.weight");
  }
  // Wrong shape.
  {
    auto weights = a.state_dict();
    weights[0].second = Tensor::zeros({3, 3});
    io::save_safetensors(model_file, weights);
    expect_error("fc1.weight");
  }
  // Wrong dtype (integer where a float parameter is expected).
  {
    auto weights = a.state_dict();
    weights[1].second = Tensor::zeros({8}, DType::I64);
    io::save_safetensors(model_file, weights);
    expect_error("fc1.bias");
  }
  // Truncated file.
  {
    io::save_safetensors(model_file, a.state_dict());
    fs::resize_file(model_file, fs::file_size(model_file) - 10);
    expect_error("model.safetensors");
  }
  // Missing sidecar.
  fs::remove(dir_ / "trainer_state.json");
  expect_error("trainer_state.json");
  // Not a directory.
  Mlp b;
  EXPECT_THROW(load_checkpoint((dir_ / "nope").string(), b, nullptr), Error);
}

TEST_F(CheckpointTest, StrategyStateTravelsWithTheCheckpoint) {
  manual_seed(3);
  const auto policy = nn::backward::Policy::from_json({{"default", {{"type", "hot"}}}}, "backward");
  Mlp a;
  auto strategies = policy.apply(a);
  optim::SGD opt(optim::single_group(a.named_parameters(), 1e-2));
  train_step(a, opt);  // HOT decides its quantiser (LQS) on the first backward
  save_checkpoint(dir_.string(), a, &opt, nullptr);
  // Accounting covers every layer and sums them.
  const auto acc = nn::backward::accounting_report(strategies);
  ASSERT_EQ(acc["layers"].size(), 2u);
  EXPECT_NEAR(acc["total"]["paper_backward_mflops_per_sample"].get<double>(),
              acc["layers"][0]["paper"]["backward_mflops_per_sample"].get<double>() +
                  acc["layers"][1]["paper"]["backward_mflops_per_sample"].get<double>(),
              1e-9);
  EXPECT_GT(acc["total"]["measured_saved_bytes_last_call"].get<int64_t>(), 0);

  Mlp b;
  auto sb = policy.apply(b);
  optim::SGD opt_b(optim::single_group(b.named_parameters(), 1e-2));
  const LoadedCheckpoint ck = load_checkpoint(dir_.string(), b, &opt_b);
  EXPECT_TRUE(ck.notes.empty());
  for (size_t i = 0; i < sb.size(); ++i)
    EXPECT_EQ(sb[i]->state_json(), strategies[i]->state_json()) << sb[i]->layer_name();
  EXPECT_EQ(ck.state["backward"]["fc1"]["type"], "hot");

  Mlp c;  // resumed with another strategy: state is not forced onto it, and it is said so
  nn::backward::Policy().apply(c);
  optim::SGD opt_c(optim::single_group(c.named_parameters(), 1e-2));
  EXPECT_EQ(load_checkpoint(dir_.string(), c, &opt_c).notes.size(), 2u);
}

}  // namespace
}  // namespace lb::train
