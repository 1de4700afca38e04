// Data-parallel training over MPI. These tests need two ranks: CTest runs this executable
// under `mpirun -np 2` (Dist.TwoRanks); run alone, every test skips. Each test runs on both
// ranks in the same order (their collectives pair up); the single-process references run on
// rank 0 only, through dist::single_process().
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "lb/core/cuda_runtime_info.h"
#include "lb/core/philox.h"
#include "lb/core/random.h"
#include "lb/dist/nccl_group.h"
#include "lb/dist/process_group.h"
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"
#include "lb/nn/layers.h"
#include "lb/ops.h"
#include "lb/train/memory/memory_planner.h"
#include "lb/train/trainer.h"
#include "src/train/data_parallel.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;

#define NEED_TWO_RANKS()                                                                         \
  if (dist::world().size() < 2)                                                                  \
  GTEST_SKIP() << "needs 2 MPI ranks: CTest runs this file under mpirun -np 2 (Dist.TwoRanks)"

dist::ProcessGroup& pg() { return dist::world(); }

// One directory for all ranks (rank 0's temporary directory, broadcast).
struct SharedDir {
  std::unique_ptr<lb::testing::TempDir> own;
  std::string path;
  SharedDir() {
    if (pg().is_main()) {
      own = std::make_unique<lb::testing::TempDir>("lb_dist");
      path = own->path().string();
    }
    pg().broadcast(path, 0, "test directory");
  }
  std::string sub(const std::string& n) const { return path + "/" + n; }
};

// NCCL between the two ranks, rendezvous over MPI: runs where each rank has a GPU of its own
// (tools/gpu_check.sh on a machine with two or more; Dist.TwoRanks leaves it out).
TEST(DistNccl, TwoRanksMeetOverMpiAndSum) {
  NEED_TWO_RANKS();
  if (!dist::nccl_compiled() || cuda_device_count() < pg().size())
    GTEST_SKIP() << "needs NCCL and one CUDA device per rank (" << cuda_device_count() << " found)";
  auto g = dist::make_nccl_group();
  EXPECT_EQ(g->size(), pg().size());
  EXPECT_EQ(g->rank(), pg().rank());
  Tensor t = Tensor::full({5}, static_cast<double>(g->rank() + 1), DType::F32).to(Device::cuda(g->rank()));
  g->all_reduce_sum(t, "test tensor");
  for (double v : t.to(Device::cpu()).to_double_vector()) EXPECT_EQ(v, 3.0);
  std::string s = g->is_main() ? "from rank 0" : "";
  g->broadcast(s, 0, "test string");
  EXPECT_EQ(s, "from rank 0");
}

TEST(Dist, CollectivesCarryTensorsAndStrings) {
  NEED_TWO_RANKS();
  Tensor t = Tensor::full({3}, static_cast<double>(pg().rank() + 1), DType::F64);
  pg().all_reduce_sum(t, "test tensor");
  for (double v : t.to_double_vector()) EXPECT_EQ(v, 3.0);  // 1 + 2
  Tensor b = Tensor::full({2, 2}, pg().is_main() ? 7.0 : -1.0, DType::F32);
  pg().broadcast(b, 0, "test broadcast");
  for (double v : b.to_double_vector()) EXPECT_EQ(v, 7.0);
  std::string s = pg().is_main() ? "from rank 0" : "";
  pg().broadcast(s, 0, "test string");
  EXPECT_EQ(s, "from rank 0");
  const Tensor g = pg().all_gather(Tensor::full({2}, static_cast<double>(pg().rank()), DType::F32), "test gather");
  EXPECT_EQ(g.shape(), (Shape{2, 2}));
  EXPECT_EQ(g.to_double_vector(), (std::vector<double>{0, 0, 1, 1}));
}

// f64: each rank's gradient of its half of a batch, weighted by its share and summed by
// GradientSync, equals the gradient of the whole batch in one process (to rounding).
TEST(Dist, SummedGradientsEqualTheWholeBatchF64) {
  NEED_TWO_RANKS();
  manual_seed(11);
  nn::Linear fc1(5, 7), fc2(7, 3);
  fc1.to(DType::F64);
  fc2.to(DType::F64);
  const Tensor x = rand_normal({10, 5}, default_generator()).to(DType::F64);  // same on both ranks
  auto loss_of = [&](const Tensor& xs, double share) {
    return mul(mean(mul(fc2.forward(tanh(fc1.forward(xs))), fc2.forward(tanh(fc1.forward(xs))))),
               Tensor::full({}, share, DType::F64));
  };
  std::vector<Tensor> params;
  for (auto* m : {&fc1, &fc2})
    for (const auto& p : m->parameters()) params.push_back(p);
  // Whole batch, one process.
  loss_of(x, 1.0).backward();
  std::vector<std::vector<double>> want;
  for (auto& p : params) {
    want.push_back(p.grad().to_double_vector());
    p.zero_grad();
  }
  // Rank r: rows [5r, 5r + 5), share 1/2, summed over ranks.
  GradientSync sync(pg(), params, /*bucket_bytes=*/200);  // several buckets
  EXPECT_GT(sync.buckets(), 1);
  loss_of(x.slice(0, 5 * pg().rank(), 5 * pg().rank() + 5), 0.5).backward();
  sync.all_reduce_gradients();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto got = params[i].grad().to_double_vector();
    for (size_t j = 0; j < got.size(); ++j) ASSERT_NEAR(got[j], want[i][j], 1e-12) << "param " << i;
  }
}

// The parameters of a finished run's last checkpoint, by name.
std::map<std::string, std::vector<double>> final_params(const std::string& run_dir, int64_t step) {
  const auto f = io::load_safetensors(run_dir + "/checkpoint-" + std::to_string(step) + "/model.safetensors");
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : f.tensors) out[name] = t.to_double_vector();
  return out;
}

// Training options for both ranks: no log lines, no progress bar, run directory `out`.
TrainOptions on_both_ranks(const std::string& out) {
  TrainOptions o = lb::testing::quiet(out);
  o.group = &pg();
  return o;
}

nlohmann::json backward_for(const std::string& s) {
  if (s == "instant")
    return {{"default", {{"type", "instant"}, {"rank", 4}, {"calib_every", 5}, {"calib_batches", 2}, {"gram_dtype", "f64"}}}};
  if (s == "hot") return {{"default", {{"type", "hot"}, {"quantize", false}}}};
  return {{"default", {{"type", "vanilla"}}}};
}

// N = 2 ranks with batch B give the loss curve and parameters of one process with batch 2B
// (f32, 20 steps, no dropout), for each strategy; INSTANT's bases come from the summed Grams.
class DistTrainer : public ::testing::TestWithParam<std::string> {};

TEST_P(DistTrainer, TwoRanksEqualOneProcessWithTheGlobalBatch) {
  NEED_TWO_RANKS();
  const SharedDir dir;
  nlohmann::json j = lb::testing::tiny_bert_config(20, /*dropout=*/0.0);
  j["data"]["synthetic_train"] = 100;  // 100 / 16: a short last global batch (4 per rank)
  j["backward"] = backward_for(GetParam());
  if (GetParam() != "hot") {
    // Each rank pads its own part and packs it; INSTANT projects every packed sequence on
    // its own, so its results do not depend on how the batch is split.
    j["data"]["padding"] = "dynamic";
  } else {
    // HOT's 16-row blocks run over the flattened tokens: they line up with the one-process
    // batch only when every sequence is 32 rows and nothing is packed.
    j["data"]["padding"] = "max_length";
    j["model"]["skip_padding"] = false;
  }
  j["train"]["log_every"] = 1;
  j["train"]["bucket_cap_mb"] = 0.05;  // several all-reduce buckets, overlapping the backward
  TrainOptions o = on_both_ranks(dir.sub("dp"));
  const TrainResult dp = train(Config::from_json(j, "dist.json"), o);
  if (!pg().is_main()) return;
  j["data"]["batch_size"] = 16;
  o.group = &dist::single_process();
  o.out_dir = dir.sub("one");
  const TrainResult one = train(Config::from_json(j, "one.json"), o);
  ASSERT_EQ(dp.losses.size(), one.losses.size());
  for (size_t i = 0; i < dp.losses.size(); ++i) EXPECT_NEAR(dp.losses[i], one.losses[i], 1e-5) << "step " << i + 1;
  const auto a = final_params(dir.sub("dp"), 20), b = final_params(dir.sub("one"), 20);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, v] : a) {
    const auto& w = b.at(name);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(v[i], w[i], 1e-5) << name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, DistTrainer, ::testing::Values("vanilla", "instant", "hot"));

// Interrupted after 8 steps with 2 ranks, resumed with 2 ranks: the same run as
// uninterrupted; resumed with 1 process and the global batch: the same too.
TEST(Dist, ResumeWithTheSameOrAnotherNumberOfRanks) {
  NEED_TWO_RANKS();
  const SharedDir dir;
  nlohmann::json j = lb::testing::tiny_bert_config(16, /*dropout=*/0.0);
  j["train"]["save_every"] = 4;
  j["train"]["keep_checkpoints"] = 10;
  TrainOptions o = on_both_ranks(dir.sub("full"));
  const TrainResult full = train(Config::from_json(j, "dist.json"), o);
  o.out_dir = dir.sub("cut");
  o.interrupt_after = 8;
  const TrainResult cut = train(Config::from_json(j, "dist.json"), o);
  EXPECT_TRUE(cut.interrupted);
  o.interrupt_after = 0;
  o.resume = dir.sub("cut");
  const TrainResult resumed = train(Config::from_json(j, "dist.json"), o);
  if (pg().is_main()) {
    ASSERT_EQ(resumed.losses.size(), 8u);
    for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(resumed.losses[i], full.losses[8 + i], 1e-6) << i;
    // The checkpoint at step 8, continued by one process with the global batch.
    nlohmann::json one = j;
    one["data"]["batch_size"] = 16;
    TrainOptions o1 = o;
    o1.group = &dist::single_process();
    o1.out_dir = dir.sub("one");
    fs::create_directories(dir.sub("one"));
    fs::copy(dir.sub("cut") + "/checkpoint-8", dir.sub("one") + "/checkpoint-8", fs::copy_options::recursive);
    o1.resume = dir.sub("one") + "/checkpoint-8";
    const TrainResult r1 = train(Config::from_json(one, "one.json"), o1);
    ASSERT_EQ(r1.losses.size(), 8u);
    for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(r1.losses[i], full.losses[8 + i], 1e-5) << i;
  }
}

// A memory budget with two ranks: rank 0 plans for its batch (each rank's), every rank
// carries out that one plan, and a resumed run reuses it on every rank. Exact choices only
// (recomputation), so the run equals one process with the global batch and no budget.
TEST(Dist, RanksShareRankZerosMemoryPlan) {
  NEED_TWO_RANKS();
  const SharedDir dir;
  nlohmann::json j = lb::testing::tiny_bert_config(6, /*dropout=*/0.0);
  j["data"]["padding"] = "dynamic";
  j["train"]["log_every"] = 1;
  j["memory"] = {{"activation_budget", "0.75x"}, {"fidelity_weight", 1e9}};
  TrainOptions o = on_both_ranks(dir.sub("dp"));
  const TrainResult dp = train(Config::from_json(j, "dist.json"), o);
  const std::string saved = dir.sub("dp") + "/memory_plan.json";
  ASSERT_FALSE(dp.memory_plan.is_null());
  EXPECT_EQ(dp.memory_plan, io::read_json_file(saved)) << "rank " << pg().rank();
  const MemoryPlan plan = MemoryPlan::from_json(dp.memory_plan, "plan");
  bool recomputes = false;
  for (const auto& part : plan.parts) recomputes = recomputes || part.option.recompute;
  EXPECT_TRUE(recomputes) << dp.memory_plan.dump();
  if (pg().is_main()) {
    std::ifstream in(dir.sub("dp") + "/metrics.jsonl");
    int lines = 0;
    for (std::string l; std::getline(in, l);)
      if (const auto m = nlohmann::json::parse(l); m["type"] == "train") {
        ++lines;
        EXPECT_LE(m["activation_peak_bytes"].get<int64_t>(), plan.budget_bytes) << l;
      }
    EXPECT_EQ(lines, 6);
    nlohmann::json one = j;
    one.erase("memory");
    one["data"]["batch_size"] = 16;
    TrainOptions o1 = o;
    o1.group = &dist::single_process();
    o1.out_dir = dir.sub("one");
    const TrainResult r1 = train(Config::from_json(one, "one.json"), o1);
    ASSERT_EQ(r1.losses.size(), dp.losses.size());
    for (size_t i = 0; i < dp.losses.size(); ++i) EXPECT_NEAR(dp.losses[i], r1.losses[i], 1e-5) << "step " << i + 1;
  }
  pg().barrier("one-process reference");

  // Interrupted and resumed with two ranks: rank 0's saved plan (marked) reaches rank 1.
  o.out_dir = dir.sub("cut");
  o.interrupt_after = 3;
  EXPECT_TRUE(train(Config::from_json(j, "dist.json"), o).interrupted);
  if (pg().is_main()) {
    nlohmann::json p = io::read_json_file(dir.sub("cut") + "/memory_plan.json");
    p["profile_s"] = 12345.0;  // a new plan would not carry it
    std::ofstream(dir.sub("cut") + "/memory_plan.json") << p.dump(2);
  }
  pg().barrier("marked plan");
  o.interrupt_after = 0;
  o.resume = dir.sub("cut");
  const TrainResult rest = train(Config::from_json(j, "dist.json"), o);
  EXPECT_EQ(rest.memory_plan.value("profile_s", 0.0), 12345.0) << "rank " << pg().rank();
  if (pg().is_main()) {
    ASSERT_EQ(rest.losses.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(rest.losses[i], dp.losses[3 + i], 1e-6) << i;
  }
}

}  // namespace
}  // namespace lb::train
