// What `leanback eval` and `leanback predict` share: a config's model, built and given the
// weights of a checkpoint (checked against the config it trained with) or of
// model.pretrained, with the data to run it on; and the rules for the files they write.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/device.h"
#include "lb/train/config.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"

namespace lb::cli {

struct Loaded {
  train::Config config;
  train::TaskData data;
  std::unique_ptr<train::TaskModel> model;
};

extern const char* const kCheckpointHelp;
extern const char* const kAllowConfigChangeHelp;

// The config's model and data (options: which split, or texts), with the checkpoint's weights
// (or model.pretrained's, where they leave nothing at random), on `device`. every_row: no
// data.max_eval_examples (a submission holds every row).
Loaded load_for_eval(const std::string& config_path, const std::vector<std::string>& sets,
                     const std::string& checkpoint, const train::TaskDataOptions& options, Device device,
                     bool every_row = false, bool allow_config_change = false);

// What the weights came from, for the printed result.
nlohmann::json weights_source(const train::Config& c, const std::string& checkpoint);

// An existing file is replaced only with --overwrite.
void refuse_existing(const std::filesystem::path& p, bool overwrite);

// predict --out: a directory leanback creates (and marks) for its submission files, or an
// existing one it only adds files to; files there are replaced only with --overwrite and only
// in a directory leanback created for predictions (output_dir.h).
void refuse_replacing(const std::filesystem::path& file, const std::filesystem::path& dir, bool overwrite);

}  // namespace lb::cli
