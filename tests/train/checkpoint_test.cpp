// Checkpoints: round trip, exact resume, and clear errors for damaged checkpoints.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>

#include "lb/core/random.h"
#include "lb/io/safetensors.h"
#include "lb/nn/backward/accounting.h"
#include "lb/nn/backward/policy.h"
#include "lb/nn/layers.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/trainer.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

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
  // Rewritten files carry the checkpoint's save id, so the checks below reach their key.
  const std::string save_id = nlohmann::json::parse(std::ifstream(dir_ / "trainer_state.json"))["save_id"];
  const std::map<std::string, std::string> meta = {{"save_id", save_id}};
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
    io::save_safetensors(model_file, weights, meta);
    expect_error("fc1.weight");
  }
  // Wrong shape.
  {
    auto weights = a.state_dict();
    weights[0].second = Tensor::zeros({3, 3});
    io::save_safetensors(model_file, weights, meta);
    expect_error("fc1.weight");
  }
  // Wrong dtype (integer where a float parameter is expected).
  {
    auto weights = a.state_dict();
    weights[1].second = Tensor::zeros({8}, DType::I64);
    io::save_safetensors(model_file, weights, meta);
    expect_error("fc1.bias");
  }
  // Truncated file.
  {
    io::save_safetensors(model_file, a.state_dict(), meta);
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
    EXPECT_EQ(sb[i]->state_json(), strategies[i]->state_json()) << sb[i]->record().name;
  EXPECT_EQ(ck.state["backward"]["fc1"]["type"], "hot");

  Mlp c;  // resumed with another strategy: state is not forced onto it, and it is said so
  nn::backward::Policy().apply(c);
  optim::SGD opt_c(optim::single_group(c.named_parameters(), 1e-2));
  EXPECT_EQ(load_checkpoint(dir_.string(), c, &opt_c).notes.size(), 2u);
}


// Files of two different saves in one checkpoint directory are refused, naming both.
TEST_F(CheckpointTest, TornCheckpointIsRefused) {
  Mlp a, b;
  save_checkpoint(dir_.string(), a, nullptr, nullptr);
  save_checkpoint((dir_ / "other").string(), b, nullptr, nullptr);
  fs::copy_file(dir_ / "other" / "model.safetensors", dir_ / "model.safetensors", fs::copy_options::overwrite_existing);
  Mlp c;
  try {
    load_checkpoint(dir_.string(), c, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to another save"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the checkpoint is torn"), std::string::npos) << e.what();
  }
}

// The writer half of KilledSavesLeaveOneConsistentCheckpoint: run as a child process, it
// overwrites one checkpoint forever, each save's weights all equal to its "marker".
TEST(CheckpointTorture, Writer) {
  const char* dir = std::getenv("LB_CKPT_TORTURE_DIR");
  if (dir == nullptr) GTEST_SKIP() << "the child process of KilledSavesLeaveOneConsistentCheckpoint";
  nn::Linear m(512, 1024);  // 2 MiB of weights: a save takes a few milliseconds
  for (int64_t i = 1;; ++i) {
    m.weight().fill_(static_cast<double>(i));
    m.bias().fill_(static_cast<double>(i));
    save_checkpoint(dir, m, nullptr, nullptr, {{"marker", i}});
    if (i == 1) std::ofstream(std::string(dir) + ".ready") << "1";
  }
}

// kill -9 at random points of overwriting saves: the checkpoint always loads as one save
// (weights and state agree), and the next save clears what the killed ones left.
TEST_F(CheckpointTest, KilledSavesLeaveOneConsistentCheckpoint) {
  const fs::path ck = dir_ / "checkpoint-1";
  fs::create_directories(dir_);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::mt19937 rng(12345);
  int64_t last_marker = 0, advanced = 0;
  for (int kill_no = 0; kill_no < 20; ++kill_no) {
    fs::remove(ck.string() + ".ready");
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("LB_CKPT_TORTURE_DIR", ck.c_str(), 1);
      ::execl(self.c_str(), self.c_str(), "--gtest_filter=CheckpointTorture.Writer", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Wait for a first completed save (at most 30 s), then kill at a random moment.
    for (int i = 0; i < 3000 && !fs::exists(ck.string() + ".ready"); ++i) ::usleep(10000);
    ASSERT_TRUE(fs::exists(ck.string() + ".ready")) << "the writer never saved";
    ::usleep(static_cast<useconds_t>(std::uniform_int_distribution<int>(1000, 40000)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    nn::Linear m(512, 1024);
    const LoadedCheckpoint loaded = load_checkpoint(ck.string(), m, nullptr);
    const int64_t marker = loaded.state["extra"]["marker"];
    const auto w = m.weight().to_double_vector(), b = m.bias().to_double_vector();
    EXPECT_EQ(*std::min_element(w.begin(), w.end()), static_cast<double>(marker)) << "kill " << kill_no;
    EXPECT_EQ(*std::max_element(w.begin(), w.end()), static_cast<double>(marker)) << "kill " << kill_no;
    EXPECT_EQ(b.front(), static_cast<double>(marker)) << "kill " << kill_no;
    if (marker > last_marker) ++advanced;
    last_marker = marker;
  }
  EXPECT_GT(advanced, 0);
  // One more save clears the leftovers of killed ones.
  nn::Linear m(512, 1024);
  save_checkpoint(ck.string(), m, nullptr, nullptr);
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string n = e.path().filename().string();
    EXPECT_TRUE(n == "checkpoint-1" || n == "checkpoint-1.ready") << "left over: " << n;
  }
}


// Out-of-range numbers and wrong shapes in trainer_state.json are named errors (they were
// undefined float->integer casts, or raw nlohmann exceptions without the file's name).
TEST_F(CheckpointTest, HostileTrainerStateValuesAreNamedErrors) {
  Mlp a;
  optim::Adam opt(optim::single_group(a.named_parameters(), 1e-2));
  save_checkpoint(dir_.string(), a, &opt, nullptr);
  const fs::path state_file = dir_ / "trainer_state.json";
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(state_file));
  const auto load_with = [&](const nlohmann::json& state) {
    std::ofstream(state_file) << state.dump();
    Mlp b;
    optim::Adam ob(optim::single_group(b.named_parameters(), 1e-2));
    return testing::error_message([&] { load_checkpoint(dir_.string(), b, &ob); });
  };
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["step"] = 1e300; }, "step: expected an integer"},
      {[](nlohmann::json& j) { j["step"] = -1.5; }, "step: expected an integer"},
      {[](nlohmann::json& j) { j["format_version"] = 4294967297ull; }, "unsupported format_version 4294967297"},
      {[](nlohmann::json& j) { j["format_version"] = "2"; }, "unsupported format_version \"2\""},
      {[](nlohmann::json& j) { j["rng"]["seed"] = -3; }, "rng.seed: expected a non-negative integer, got -3"},
      {[](nlohmann::json& j) { j["rng"]["offset"] = 1e300; }, "rng.offset: expected a non-negative integer"},
      {[](nlohmann::json& j) { j["optimizer"]["step"] = 2.5; }, "optimizer.step: expected an integer"},
      {[](nlohmann::json& j) { j = nlohmann::json::array(); }, "trainer_state.json: expected a JSON object"},
      {[](nlohmann::json& j) { j = nullptr; }, "trainer_state.json: expected a JSON object"},
  };
  for (const auto& [mutate, needle] : cases) {
    nlohmann::json j = good;
    mutate(j);
    const std::string m = load_with(j);
    EXPECT_NE(m.find(needle), std::string::npos) << "want '" << needle << "', got: " << m;
  }
}


// A save clears leftovers of killed saves, but never another live process's save in a shared
// parent directory (ctest runs checkpoint tests side by side in /tmp).
TEST_F(CheckpointTest, LeftoversOfDeadWritersAreClearedLiveOnesKept) {
  fs::create_directories(dir_);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a process that is gone
  const fs::path live = dir_ / (".other.saving-1-" + std::to_string(::getpid()) + "-0");
  const fs::path dead = dir_ / (".other.saving-1-" + std::to_string(child) + "-0");
  const fs::path dead_retired = dir_ / (".gone.old-1-" + std::to_string(child) + "-0");
  for (const auto& p : {live, dead, dead_retired}) fs::create_directories(p);
  std::ofstream(dead_retired / "trainer_state.json") << "{}";
  Mlp a;
  save_checkpoint((dir_ / "ck").string(), a, nullptr, nullptr);
  EXPECT_TRUE(fs::exists(live));
  EXPECT_FALSE(fs::exists(dead));
  // A retired checkpoint whose replacement never landed is put back under its name.
  EXPECT_FALSE(fs::exists(dead_retired));
  EXPECT_TRUE(fs::exists(dir_ / "gone" / "trainer_state.json"));
}

// A run with coded optimizer state (optimizer.state_bits 8 and 4): the checkpoint holds the
// codes, and a resumed run equals the uninterrupted one bit for bit (4-bit rounding draws are
// keyed by parameter, step and block, not by a generator's position).
TEST(CodedOptimizerState, ResumedRunEqualsUninterrupted) {
  for (int bits : {8, 4}) {
    testing::TempDir tmp("lb_coded");
    nlohmann::json j = testing::tiny_bert_config(6);
    j["optimizer"]["state_bits"] = bits;
    const Config c = Config::from_json(j, "tiny.json");
    const TrainResult full = train(c, testing::quiet(tmp.sub("full")));
    TrainOptions first = testing::quiet(tmp.sub("cut"));
    first.interrupt_after = 3;
    ASSERT_TRUE(train(c, first).interrupted);
    const auto state = io::load_safetensors(tmp.sub("cut") + "/checkpoint-3/optimizer.safetensors");
    int64_t codes = 0;
    for (const auto& [name, t] : state.tensors) codes += t.dtype() == DType::U8;
    EXPECT_EQ(codes * 2, static_cast<int64_t>(state.tensors.size())) << "a code tensor and a scale tensor each";
    TrainOptions second = testing::quiet(tmp.sub("cut"));
    second.resume = tmp.sub("cut");
    const TrainResult rest = train(c, second);
    ASSERT_EQ(rest.losses.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rest.losses[i], full.losses[3 + i]) << bits << " bits, step " << 3 + i;
    const auto w = [](const std::string& ckpt) {
      std::map<std::string, std::vector<double>> out;
      for (const auto& [n, t] : io::load_safetensors(ckpt + "/model.safetensors").tensors) out[n] = t.to_double_vector();
      return out;
    };
    EXPECT_EQ(w(rest.last_checkpoint), w(full.last_checkpoint)) << bits;
    // Resuming with another width is refused, naming the setting.
    nlohmann::json other = j;
    other["optimizer"]["state_bits"] = bits == 8 ? 4 : 8;
    TrainOptions again = testing::quiet(tmp.sub("cut"));
    again.resume = tmp.sub("cut");
    EXPECT_NE(testing::error_message([&] { train(Config::from_json(other, "tiny.json"), again); })
                  .find("optimizer state was stored in " + std::to_string(bits) + " bits"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace lb::train
