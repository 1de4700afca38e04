// metrics.jsonl (lb/train/run/metrics_log.h): a line is appended whole or not at all. A full disk
// is simulated with a file-size limit (RLIMIT_FSIZE): the write fails part-way, the error
// names the file, and the file still ends at the previous line.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <fstream>

#include "lb/core/error.h"
#include "lb/train/run/metrics_log.h"
#include "testing/testing.h"

namespace lb::train {
namespace {

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(MetricsLog, AFailedWriteLeavesNoTornLine) {
  lb::testing::TempDir tmp("lb_metrics");
  const std::string path = tmp.sub("metrics.jsonl");
  MetricsLog log(path, true);
  log.write({{"type", "run"}});
  log.write({{"type", "train"}, {"step", 1}});
  const auto before = lines(path);
  ASSERT_EQ(before.size(), 2u);
  // Room for 20 more bytes only, as on a disk that fills up mid-line.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = static_cast<rlim_t>(std::ifstream(path, std::ios::ate).tellg()) + 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    log.write({{"type", "train"}, {"step", 2}, {"loss", 0.125}, {"note", std::string(100, 'x')}});
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("writing " + path + " failed: File too large"), std::string::npos) << message;
  EXPECT_NE(message.find("the partial line was removed"), std::string::npos) << message;
  EXPECT_EQ(lines(path), before);
  log.write({{"type", "train"}, {"step", 2}});  // the disk has room again
  EXPECT_EQ(lines(path).size(), 3u);
}

TEST(MetricsLog, ResumeTruncationDropsLaterAndTornLines) {
  lb::testing::TempDir tmp("lb_metrics");
  const std::string path = tmp.sub("metrics.jsonl");
  std::ofstream(path) << "{\"type\":\"run\"}\n{\"type\":\"train\",\"step\":2}\n{\"type\":\"train\",\"step\":4}\n"
                      << "{\"type\":\"tr";
  truncate_metrics(path, 3);
  EXPECT_EQ(lines(path), (std::vector<std::string>{"{\"type\":\"run\"}", "{\"type\":\"train\",\"step\":2}"}));
}

}  // namespace
}  // namespace lb::train
