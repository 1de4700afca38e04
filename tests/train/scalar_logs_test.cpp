// The scalars a run mirrors for the tools people read: scalars.csv and TensorBoard event files
// (TFRecord frames with masked CRC-32C around Event protos), across an interruption and resume.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "lb/train/run/metrics_log.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/trainer.h"
#include "src/train/run/event_file.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;

uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

// The records of a TFRecord file, each frame's CRCs checked.
std::vector<std::string> records(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<std::string> out;
  uint64_t len = 0;
  while (in.read(reinterpret_cast<char*>(&len), sizeof len)) {
    uint32_t len_crc = 0, data_crc = 0;
    in.read(reinterpret_cast<char*>(&len_crc), sizeof len_crc);
    EXPECT_EQ(len_crc, masked(crc32c(&len, sizeof len))) << file;
    std::string data(len, '\0');
    in.read(data.data(), static_cast<std::streamsize>(len));
    in.read(reinterpret_cast<char*>(&data_crc), sizeof data_crc);
    EXPECT_EQ(data_crc, masked(crc32c(data.data(), data.size()))) << file;
    out.push_back(data);
  }
  return out;
}

TEST(ScalarLogs, Crc32cIsCastagnolis) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(ScalarLogs, CsvAndTensorBoardAcrossAResume) {
  lb::testing::TempDir tmp("lb_scalars");
  const std::string run = tmp.sub("run");
  nlohmann::json j = lb::testing::tiny_bert_config(4, 0.0);
  j["train"]["log_every"] = 1;
  const Config c = Config::from_json(j, "tiny.json");
  TrainOptions first = lb::testing::quiet(run);
  first.interrupt_after = 2;
  ASSERT_TRUE(train(c, first).interrupted);
  TrainOptions rest = lb::testing::quiet(run);
  rest.resume = run;
  const TrainResult r = train(c, rest);
  ASSERT_EQ(r.steps, 4);

  // scalars.csv: every step's loss once, in order, equal to what training returned.
  std::ifstream csv(run + "/scalars.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "step,tag,value");
  std::map<int64_t, int> losses;
  int evals = 0;
  for (std::string row; std::getline(csv, row);) {
    std::istringstream s(row);
    std::string step, tag, value;
    std::getline(s, step, ',');
    std::getline(s, tag, ',');
    std::getline(s, value);
    if (tag == "train/loss") ++losses[std::stoll(step)];
    if (tag == "eval/accuracy") ++evals;
  }
  EXPECT_EQ(losses, (std::map<int64_t, int>{{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  EXPECT_EQ(evals, 1);

  // Two event files (one per process), both in the run's marker; each opens with the format
  // record, the resumed one then restarts at step 2, and its losses are steps 3 and 4.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
  ASSERT_EQ(files.size(), 2u);
  int restarts = 0, loss_points = 0;
  for (const auto& f : files) {
    EXPECT_TRUE(was_written(run, f.filename().string())) << f;
    const auto recs = records(f);
    ASSERT_FALSE(recs.empty());
    EXPECT_NE(recs[0].find("brain.Event:2"), std::string::npos);
    for (const auto& rec : recs) {
      // A restart: the record ends in session_log {status: START} (field 6, 2 bytes: 08 01).
      restarts += rec.size() >= 4 && rec.compare(rec.size() - 4, 4, "\x32\x02\x08\x01") == 0;
      loss_points += rec.find("train/loss") != std::string::npos;
    }
  }
  EXPECT_EQ(loss_points, 4);
  EXPECT_TRUE(was_written(run, "scalars.csv"));
  EXPECT_EQ(restarts, 1);
}

}  // namespace
}  // namespace lb::train
