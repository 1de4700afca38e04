// load_for_eval and the output-file rules of eval and predict (see eval_model.h).
#include "src/cli/eval_model.h"

#include <iostream>

#include "lb/train/run/checkpoint.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/trainer.h"

namespace lb::cli {

namespace fs = std::filesystem;

const char* const kCheckpointHelp =
    "a checkpoint, or a run directory (its latest); without it, the weights model.pretrained gives (a fine-tuned "
    "Hugging Face directory, a PEFT adapter)";
const char* const kAllowConfigChangeHelp =
    "evaluate even where the config's model or lora settings differ from those the checkpoint trained with "
    "(a warning names them)";

namespace {

// The checkpoint's recorded config against the one evaluating it: a setting that changes the
// maths (lora.alpha, model.hidden_act, ...) would give other results from the same weights.
void check_against_checkpoint(const train::Config& c, const std::string& config_path, const std::string& ckpt,
                              const train::LoadedCheckpoint& loaded, bool allow) {
  if (!loaded.state.contains("extra") || !loaded.state["extra"].contains("config")) return;
  const std::vector<std::string> diff = train::maths_differences(c, loaded.state["extra"]["config"]);
  if (diff.empty()) return;
  std::string list;
  for (const auto& d : diff) list += "\n  " + d;
  if (!allow)
    throw Error(config_path + ": the model it builds differs from the one checkpoint " + ckpt + " trained, in:" +
                list + "\nevaluate with the config it trained with (its run directory's config.json), or pass "
                "--allow-config-change");
  std::cerr << "warning: --allow-config-change: the model differs from the one checkpoint " << ckpt
            << " trained, in:" << list << "\n";
}

// A user's own classes (data.labels, or the training file's): the checkpoint's in the same
// order, or every prediction would carry another class's name.
void check_labels(const std::vector<std::string>& names, const std::string& config_path, const std::string& ckpt,
                  const train::LoadedCheckpoint& loaded) {
  const nlohmann::json& extra = loaded.state.value("extra", nlohmann::json::object());
  if (!extra.contains("task") || !extra["task"].contains("label_names")) return;
  const nlohmann::json saved = extra["task"]["label_names"];
  LB_CHECK(saved == nlohmann::json(names), config_path, ": the classes in id order are ", nlohmann::json(names).dump(),
           " but checkpoint ", ckpt, " trained with ", saved.dump(), " (set data.labels to the checkpoint's)");
}

}  // namespace

Loaded load_for_eval(const std::string& config_path, const std::vector<std::string>& sets,
                     const std::string& checkpoint, const train::TaskDataOptions& options, Device device,
                     bool every_row, bool allow_config_change) {
  Loaded l{train::load_config(config_path, sets), {}, nullptr};
  if (every_row) l.config.data.max_eval_examples = 0;  // a submission holds every test row
  train::TaskDataOptions o = options;
  o.train = false;
  l.data = train::load_task_data(l.config, o);
  l.model = train::build_task_model(l.config, l.data.num_labels, l.data.vocab_size);
  if (checkpoint.empty()) {
    // The weights model.pretrained gives (a fine-tuned Hugging Face directory, a PEFT
    // adapter), where they leave nothing at random.
    const train::ModelSection& m = l.config.model;
    LB_CHECK(!m.pretrained.empty(), config_path, ": --checkpoint: required, as model.pretrained is not set "
             "(without either the model is untrained)");
    const auto& fresh = l.model->fresh_parameters();
    LB_CHECK(fresh.empty(), config_path, ": --checkpoint: required, as ", m.pretrained_as_given(),
             " has no trained ", fresh.front(), fresh.size() > 1 ? " (and " + std::to_string(fresh.size() - 1) +
             " more)" : std::string(), ", which would start at random: a pretrained encoder needs a fine-tuned "
             "checkpoint, or a directory exported from one");
  } else {
    const std::string ckpt = train::find_checkpoint(checkpoint, "--checkpoint");
    const train::LoadedCheckpoint loaded = train::load_checkpoint(ckpt, l.model->module(), nullptr);
    check_against_checkpoint(l.config, config_path, ckpt, loaded, allow_config_change);
    if (train::is_own_text_task(l.config.data.task) && !l.data.regression)
      check_labels(l.data.label_names, config_path, ckpt, loaded);
  }
  l.model->to(device);
  return l;
}

nlohmann::json weights_source(const train::Config& c, const std::string& checkpoint) {
  if (!checkpoint.empty()) return {{"checkpoint", train::find_checkpoint(checkpoint, "--checkpoint")}};
  return {{"checkpoint", nullptr}, {"pretrained", c.model.pretrained_as_given()}};
}

void refuse_existing(const fs::path& p, bool overwrite) {
  if (!overwrite && fs::exists(p))
    throw Error(p.string() + " already exists; pass --overwrite to replace it");
}

void refuse_replacing(const fs::path& file, const fs::path& dir, bool overwrite) {
  if (!fs::exists(fs::symlink_status(file))) return;
  refuse_existing(file, overwrite);
  if (train::output_marker(dir) != train::OutputKind::Predict)
    throw train::OutputRefused("--overwrite refused: " + file.string() + " is in " + dir.string() +
                               ", which leanback did not create for predictions (no " + train::kOutputMarker +
                               " marker), so it may be a file of yours; pass --out DIR for a new directory");
  if (!train::was_written(dir, file.filename().string()))
    throw train::OutputRefused("--overwrite refused: " + file.string() + " is not a file leanback wrote there (its " +
                               train::kOutputMarker + " does not record it), so it may be yours; pass --out DIR "
                               "for a new directory");
}

}  // namespace lb::cli
