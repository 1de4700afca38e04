// The NCCL group and how its ranks meet. The rendezvous (torchrun variables, the id file, hex
// coding) runs everywhere; the collectives need a CUDA device and a build with NCCL and skip
// otherwise (tools/gpu_check.sh runs them on the GPU machine with a one-rank communicator).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "lb/core/cuda_runtime_info.h"
#include "lb/dist/nccl_group.h"
#include "src/dist/rendezvous.h"
#include "testing/testing.h"

namespace lb::dist {
namespace {

// Sets environment variables for one test and restores them after.
class EnvScope {
 public:
  void set(const char* name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~EnvScope() {
    for (const auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(Rendezvous, RankInfoFromTorchrunVariables) {
  EnvScope env;
  env.set("RANK", nullptr);
  env.set("WORLD_SIZE", nullptr);
  env.set("LOCAL_RANK", nullptr);
  RankInfo r = rank_info_from_env();
  EXPECT_FALSE(r.from_env);
  EXPECT_EQ(r.size, 1);
  env.set("RANK", "3");
  env.set("WORLD_SIZE", "4");
  env.set("LOCAL_RANK", "1");
  r = rank_info_from_env();
  EXPECT_TRUE(r.from_env);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.size, 4);
  EXPECT_EQ(r.local_rank, 1);
  env.set("RANK", "4");  // not below WORLD_SIZE
  EXPECT_NE(testing::error_message([] { rank_info_from_env(); }).find("RANK='4' must be an integer in [0, 3]"),
            std::string::npos);
  env.set("RANK", "2x");
  EXPECT_NE(testing::error_message([] { rank_info_from_env(); }).find("RANK='2x'"), std::string::npos);
  env.set("RANK", "1");
  env.set("WORLD_SIZE", nullptr);
  EXPECT_NE(testing::error_message([] { rank_info_from_env(); }).find("RANK is set but WORLD_SIZE is not"),
            std::string::npos);
}

TEST(Rendezvous, HexRoundTripAndErrors) {
  const uint8_t bytes[5] = {0, 1, 0xab, 0x7f, 0xff};
  const std::string h = hex_encode(bytes, 5);
  EXPECT_EQ(h, "0001ab7fff");
  EXPECT_EQ(hex_decode(h, 5, "id"), std::vector<uint8_t>(bytes, bytes + 5));
  EXPECT_EQ(hex_decode("0001AB7FFF", 5, "id"), std::vector<uint8_t>(bytes, bytes + 5));
  EXPECT_NE(testing::error_message([] { hex_decode("00", 5, "the id"); }).find("the id: expected 10 hex digits, got 2"),
            std::string::npos);
  EXPECT_NE(testing::error_message([] { hex_decode("0g", 1, "the id"); }).find("'g' is not a hex digit"),
            std::string::npos);
}

TEST(Rendezvous, FileCarriesRankZerosValue) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lb-rdv-" + std::to_string(::getpid()) + "-a")).string();
  std::filesystem::remove(path);
  std::string got;
  std::thread reader([&] { got = exchange_through_file(path, 1, "", 10.0); });  // may start first
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(exchange_through_file(path, 0, "cafe", 10.0), "cafe");
  reader.join();
  EXPECT_EQ(got, "cafe");
  // A file left by an earlier job is refused rather than handing out its stale value.
  EXPECT_NE(testing::error_message([&] { exchange_through_file(path, 0, "beef", 10.0); }).find("already exists"),
            std::string::npos);
  {
    std::ifstream f(path);
    std::string kept;
    std::getline(f, kept);
    EXPECT_EQ(kept, "cafe");  // refused, never replaced
  }
  // Rank 0 removes the file only while it holds the value it wrote.
  remove_rendezvous_file(path, "beef");
  EXPECT_TRUE(std::filesystem::exists(path));
  remove_rendezvous_file(path, "cafe");
  EXPECT_FALSE(std::filesystem::exists(path));
  // A rank waiting for a rank 0 that never writes gives up with a named error.
  EXPECT_NE(testing::error_message([&] { exchange_through_file(path, 2, "", 0.1); })
                .find("rank 2: rendezvous file " + path + " did not appear within 0.1 s"),
            std::string::npos);
}

TEST(Rendezvous, TimeoutVariable) {
  EnvScope env;
  env.set("LEANBACK_DIST_TIMEOUT", nullptr);
  EXPECT_EQ(dist_timeout_s(), 1800.0);
  env.set("LEANBACK_DIST_TIMEOUT", "2.5");
  EXPECT_EQ(dist_timeout_s(), 2.5);
  env.set("LEANBACK_DIST_TIMEOUT", "-1");
  EXPECT_NE(testing::error_message([] { dist_timeout_s(); }).find("LEANBACK_DIST_TIMEOUT='-1'"), std::string::npos);
}

bool have_nccl_device() { return nccl_compiled() && cuda_device_count() > 0; }

TEST(NcclGroup, WithoutNcclOrDeviceSaysWhich) {
  if (have_nccl_device()) GTEST_SKIP() << "this build has NCCL and a device";
  const std::string m = testing::error_message([] { make_nccl_group(); });
  EXPECT_NE(m.find(nccl_compiled() ? "the NCCL group needs a CUDA device; this process sees none"
                                   : "built without NCCL"),
            std::string::npos)
      << m;
}

TEST(NcclGroup, OneRankCollectives) {
  if (!have_nccl_device()) GTEST_SKIP() << "needs NCCL and a CUDA device";
  EnvScope env;
  env.set("RANK", nullptr);
  env.set("WORLD_SIZE", nullptr);
  auto g = make_nccl_group(0);
  EXPECT_EQ(g->backend(), "nccl");
  EXPECT_EQ(g->size(), 1);
  EXPECT_EQ(g->rank(), 0);
  const Tensor x = testing::randn({3, 5}, 1, DType::F32);
  Tensor d = x.to(Device::cuda(0));
  g->all_reduce_sum(d, "x");
  EXPECT_TRUE(testing::all_close(d.to(Device::cpu()), x, 0, 0));
  const int64_t req = g->all_reduce_sum_start(d, "x again");
  g->wait(req);
  EXPECT_TRUE(testing::all_close(d.to(Device::cpu()), x, 0, 0));
  std::vector<double> v{1.5, -2.0};
  g->all_reduce_sum(v, "losses");
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0}));
  Tensor b = Tensor::from_vector(std::vector<int64_t>{7, 8}, {2}).to(Device::cuda(0));
  g->broadcast(b, 0, "ids");
  EXPECT_EQ(b.to(Device::cpu()).to_double_vector(), (std::vector<double>{7, 8}));
  std::string s = "{\"choice\": 3}";
  g->broadcast(s, 0, "decision");
  EXPECT_EQ(s, "{\"choice\": 3}");
  const Tensor all = g->all_gather(d, "x");
  EXPECT_EQ(all.shape(), (Shape{1, 3, 5}));
  EXPECT_TRUE(testing::all_close(all.to(Device::cpu()).reshape({3, 5}), x, 0, 0));
  g->barrier("end");
  // CPU tensors, foreign dtypes and roots are named errors.
  Tensor cpu = x.clone();
  EXPECT_NE(testing::error_message([&] { g->all_reduce_sum(cpu, "grads"); })
                .find("all_reduce of grads: the NCCL group carries cuda:0 tensors, got one on cpu"),
            std::string::npos);
  Tensor u8 = Tensor::zeros({4}, DType::U8).to(Device::cuda(0));
  EXPECT_NE(testing::error_message([&] { g->all_reduce_sum(u8, "mask"); }).find("dtype u8 is not summable"),
            std::string::npos);
  EXPECT_NE(testing::error_message([&] { g->broadcast(b, 1, "ids"); }).find("root 1 is not a rank"),
            std::string::npos);
}

}  // namespace
}  // namespace lb::dist
