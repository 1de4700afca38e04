// Output directories (lb/train/run/output_dir.h): protected paths are refused, only a marked
// directory may be cleared, and clearing deletes only what leanback writes, never following
// a link. Everything here happens inside a temporary directory; "/" and $HOME are only ever
// passed to the check, which reads and never writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "lb/train/run/output_dir.h"
#include "testing/testing.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;
using lb::testing::TempDir;

void touch(const fs::path& p, const std::string& text = "x") {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs f with the current directory and $HOME changed, restoring both.
void with_cwd_and_home(const fs::path& cwd, const fs::path& home, const std::function<void()>& f) {
  const fs::path old_cwd = fs::current_path();
  const char* h = std::getenv("HOME");
  const std::string old_home = h ? h : "";
  fs::current_path(cwd);
  ::setenv("HOME", home.c_str(), 1);
  try {
    f();
  } catch (...) {
    fs::current_path(old_cwd);
    h ? ::setenv("HOME", old_home.c_str(), 1) : ::unsetenv("HOME");
    throw;
  }
  fs::current_path(old_cwd);
  h ? ::setenv("HOME", old_home.c_str(), 1) : ::unsetenv("HOME");
}

bool refused(const fs::path& p) {
  try {
    refuse_protected_dir(p, "--out");
    return false;
  } catch (const OutputRefused&) {
    return true;
  }
}

TEST(OutputDir, RootHomeCurrentDirectoryAndItsAncestorsAreRefused) {
  TempDir tmp("lb_outdir");
  const fs::path work = tmp.path() / "a" / "b", home = tmp.path() / "home";
  fs::create_directories(work);
  fs::create_directories(home);
  fs::create_directory_symlink(home, tmp.path() / "home_link");
  with_cwd_and_home(work, home, [&] {
    EXPECT_TRUE(refused("/"));
    EXPECT_TRUE(refused("."));
    EXPECT_TRUE(refused(work));
    EXPECT_TRUE(refused(".."));
    EXPECT_TRUE(refused(tmp.path()));
    EXPECT_TRUE(refused(home));
    EXPECT_TRUE(refused(tmp.path() / "home_link"));  // a link to the home directory
    EXPECT_TRUE(refused(work / "c" / ".." / ".."));
    EXPECT_FALSE(refused("run"));
    EXPECT_FALSE(refused(work / "c"));
    EXPECT_FALSE(refused(tmp.path() / "a" / "other"));
    EXPECT_FALSE(refused(home / "runs" / "x"));
  });
  const std::string m = lb::testing::error_message([&] { refuse_protected_dir("/", "--out"); });
  EXPECT_NE(m.find("--out /: the root directory cannot be an output directory"), std::string::npos) << m;
}

TEST(OutputDir, OnlyTheMarkedKindMayBeCleared) {
  TempDir tmp("lb_outdir");
  const fs::path d = tmp.path() / "users";
  touch(d / "thesis.tex", "mine");
  touch(d / "config.json", "mine too");
  EXPECT_FALSE(output_dir_fresh(d, "--out"));
  EXPECT_FALSE(output_marker(d).has_value());
  EXPECT_THROW(remove_owned_entries(d, OutputKind::Run), Error);
  EXPECT_EQ(read(d / "config.json"), "mine too");
  write_output_marker(d, OutputKind::Predict);
  EXPECT_EQ(output_marker(d), OutputKind::Predict);
  EXPECT_THROW(remove_owned_entries(d, OutputKind::Run), Error);  // another kind's marker
  EXPECT_EQ(read(d / "config.json"), "mine too");
  touch(d / "file");
  EXPECT_TRUE(output_dir_fresh(tmp.path() / "new", "--out"));
  EXPECT_THROW(output_dir_fresh(d / "file", "--out"), OutputRefused);  // a file, not a directory
}

TEST(OutputDir, ClearingKeepsWhatLeanbackDidNotWriteAndNeverFollowsLinks) {
  TempDir tmp("lb_outdir");
  const fs::path run = tmp.path() / "run", outside = tmp.path() / "outside";
  create_output_dir(run, OutputKind::Run, "--out");
  ASSERT_EQ(output_marker(run), OutputKind::Run);
  // What this run's leanback wrote, as its writers record it in the marker.
  record_written(run, {"config.json", "plan.txt", "metrics.jsonl", "checkpoint-3", "checkpoint-4", "checkpoint-5",
                       "checkpoint-6", "checkpoint-99", "eval_results.json", "plots/loss.png"});
  EXPECT_TRUE(was_written(run, "plots/loss.png"));
  EXPECT_FALSE(was_written(run, "plots/mine.png"));
  for (const char* f : {"config.json", "plan.txt", "metrics.jsonl", ".metrics.jsonl.tmp.123.0"}) touch(run / f);
  touch(run / "checkpoint-3" / "model.safetensors");
  touch(run / "checkpoint-3" / "trainer_state.json");
  touch(run / "checkpoint-4" / "model.safetensors");
  touch(run / "checkpoint-4" / "notes.txt", "mine");
  touch(run / ".checkpoint-5.saving-1-2-3" / "model.safetensors");
  touch(run / "plots" / "loss.png");
  touch(run / "plots" / "sketch.txt", "mine");
  touch(run / "plots" / "mine.png", "mine");  // a name like leanback's, not recorded
  // An export someone placed where a checkpoint was: another kind's marker, kept whole.
  create_output_dir(run / "checkpoint-99", OutputKind::Export, "--out");
  record_written(run / "checkpoint-99", {"model.safetensors"});
  touch(run / "checkpoint-99" / "model.safetensors", "an export");
  touch(run / "thesis.tex", "mine");
  touch(run / "src" / "main.cpp", "mine");
  touch(run / "checkpoint-x" / "model.safetensors", "not a checkpoint name");
  // Links to the user's files, under names leanback writes: the links go, the targets stay.
  touch(outside / "model.safetensors", "precious");
  touch(outside / "eval.json", "precious");
  fs::create_directory_symlink(outside, run / "checkpoint-6");
  fs::create_symlink(outside / "eval.json", run / "eval_results.json");

  const auto kept = remove_owned_entries(run, OutputKind::Run);
  std::set<std::string> k(kept.begin(), kept.end());
  EXPECT_EQ(k, (std::set<std::string>{"checkpoint-4/", "checkpoint-99/", "checkpoint-x", "plots/mine.png",
                                      "plots/sketch.txt", "src", "thesis.tex"}));
  EXPECT_EQ(read(run / "checkpoint-99" / "model.safetensors"), "an export");
  EXPECT_EQ(read(run / "plots" / "mine.png"), "mine");
  for (const char* gone : {"config.json", "plan.txt", "metrics.jsonl", ".metrics.jsonl.tmp.123.0", "checkpoint-3",
                           ".checkpoint-5.saving-1-2-3", "plots/loss.png", "checkpoint-6", "eval_results.json",
                           "checkpoint-4/model.safetensors"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(run / gone))) << gone;
  EXPECT_EQ(read(run / "checkpoint-4" / "notes.txt"), "mine");
  EXPECT_EQ(read(run / "thesis.tex"), "mine");
  EXPECT_EQ(read(run / "src" / "main.cpp"), "mine");
  EXPECT_EQ(read(run / "plots" / "sketch.txt"), "mine");
  EXPECT_TRUE(fs::exists(run / "checkpoint-x" / "model.safetensors"));
  EXPECT_EQ(read(outside / "model.safetensors"), "precious");
  EXPECT_EQ(read(outside / "eval.json"), "precious");
  EXPECT_EQ(output_marker(run), OutputKind::Run);  // still provably ours
}

TEST(OutputDir, AMarkerFromBeforeTheRecordDeletesOnlyTheFixedNames) {
  TempDir tmp("lb_outdir");
  const fs::path run = tmp.path() / "run";
  touch(run / kOutputMarker, R"({"written_by": "leanback", "kind": "run"})");
  for (const char* f : {"config.json", "metrics.jsonl", "checkpoint-2/model.safetensors", "plots/loss.png",
                        "plots/figure1.png", "notes.md"})
    touch(run / f);
  const auto kept = remove_owned_entries(run, OutputKind::Run);
  EXPECT_EQ(std::set<std::string>(kept.begin(), kept.end()),
            (std::set<std::string>{"notes.md", "plots"}));  // no *.png pattern
  EXPECT_TRUE(fs::exists(run / "plots" / "loss.png"));
  EXPECT_FALSE(fs::exists(run / "config.json"));
  EXPECT_FALSE(fs::exists(run / "checkpoint-2"));
  // The first record made in such a directory keeps what the fixed names cover.
  touch(run / "checkpoint-3" / "model.safetensors");
  record_written(run, {"eval_results.json"});
  EXPECT_TRUE(was_written(run, "checkpoint-3"));
  EXPECT_TRUE(was_written(run, "eval_results.json"));
  // An export's overwrite never deletes plots: an export writes none.
  const fs::path ex = tmp.path() / "export";
  create_output_dir(ex, OutputKind::Export, "--out");
  record_written(ex, {"config.json"});
  touch(ex / "config.json");
  touch(ex / "plots" / "figure1.png", "mine");
  EXPECT_EQ(remove_owned_entries(ex, OutputKind::Export), std::vector<std::string>{"plots"});
  EXPECT_EQ(read(ex / "plots" / "figure1.png"), "mine");
  EXPECT_FALSE(fs::exists(ex / "config.json"));
}

TEST(OutputDir, CheckpointRemovalTakesOnlyCheckpointFiles) {
  TempDir tmp("lb_outdir");
  const fs::path ck = tmp.path() / "checkpoint-2";
  touch(ck / "model.safetensors");
  // Not in a marked run directory: nothing is deleted.
  EXPECT_NE(remove_checkpoint_dir(ck).find("not a checkpoint of a leanback run directory"), std::string::npos);
  EXPECT_TRUE(fs::exists(ck / "model.safetensors"));
  write_output_marker(tmp.path(), OutputKind::Run);
  touch(tmp.path() / "mine" / "model.safetensors");
  EXPECT_NE(remove_checkpoint_dir(tmp.path() / "mine").find("kept"), std::string::npos);  // not a checkpoint name
  EXPECT_TRUE(fs::exists(tmp.path() / "mine" / "model.safetensors"));
  touch(ck / "optimizer.safetensors");
  touch(ck / "trainer_state.json");
  EXPECT_EQ(remove_checkpoint_dir(ck), "");
  EXPECT_FALSE(fs::exists(ck));
  touch(ck / "model.safetensors");
  touch(ck / "mine.txt");
  EXPECT_NE(remove_checkpoint_dir(ck).find("mine.txt"), std::string::npos);
  EXPECT_TRUE(fs::exists(ck / "mine.txt"));
  EXPECT_FALSE(fs::exists(ck / "model.safetensors"));
  // A directory with a marker of its own (an export) is not a checkpoint.
  const fs::path ex = tmp.path() / "checkpoint-7";
  create_output_dir(ex, OutputKind::Export, "--out");
  touch(ex / "model.safetensors", "an export");
  EXPECT_NE(remove_checkpoint_dir(ex).find("holds a leanback export directory"), std::string::npos);
  EXPECT_EQ(read(ex / "model.safetensors"), "an export");
}

TEST(OutputDir, CreatingNamesTheSystemsReason) {
  TempDir tmp("lb_outdir");
  touch(tmp.path() / "file");
  const std::string m =
      lb::testing::error_message([&] { create_output_dir(tmp.path() / "file" / "run", OutputKind::Run, "--out"); });
  EXPECT_NE(m.find("--out " + (tmp.path() / "file" / "run").string() + ": cannot create the directory"),
            std::string::npos)
      << m;
  const std::string long_name(300, 'x');
  const std::string m2 =
      lb::testing::error_message([&] { create_output_dir(tmp.path() / long_name, OutputKind::Run, "--out"); });
  EXPECT_NE(m2.find("File name too long"), std::string::npos) << m2;
}

}  // namespace
}  // namespace lb::train
