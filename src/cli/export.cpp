// `leanback export RUN_DIR|CHECKPOINT_DIR --out DIR [--merge] [--overwrite]`: a trained model
// as a Hugging Face (or PEFT, or torchvision) directory (lb/train/export/hf_export.h).
#include <iostream>

#include "lb/train/export/hf_export.h"
#include "src/cli/cli_parse.h"

namespace lb::cli {

int cmd_export(const std::vector<std::string>& args) {
  CLI::App app{"Export a trained checkpoint as a Hugging Face model directory (PEFT adapter with LoRA, "
               "torchvision weights for ResNet).",
               "leanback export"};
  std::string source, out;
  train::ExportOptions options;
  app.add_option("checkpoint", source, "a run directory (its best checkpoint; --latest: its newest) or a checkpoint directory")
      ->required();
  app.add_option("--out", out, "the directory to write (created; must be new, empty or an earlier export)")
      ->required();
  app.add_flag("--merge", options.merge, "LoRA: fold the adapters into the weights and write a plain model");
  app.add_option("--base-model", options.base_model,
                 "LoRA adapters: the base's name for adapter_config.json (default: its Hugging Face name where "
                 "tools/fetch_pretrained.sh recorded one, else its path here)");
  app.add_flag("--overwrite", options.overwrite, "replace an earlier export in --out");
  app.add_flag("--latest", options.latest,
               "of a run directory, its newest checkpoint (default: its best by the task's metric)");
  if (!parse_cli(app, args)) return 0;
  const train::ExportSummary s = train::export_checkpoint(source, out, options);
  std::cerr << "exported " << s.checkpoint << " to " << out << " (" << s.format << "):";
  for (const auto& f : s.files) std::cerr << " " << f;
  std::cerr << "\nopen it in Python with DIR = " << nlohmann::json(out).dump() << ":\n" << s.usage << "\n";
  return 0;
}

}  // namespace lb::cli
