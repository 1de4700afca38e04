// libFuzzer harness: a Hugging Face config.json (models/hf_import.h read_hf_config) turned into
// each model's config (BERT, ViT, ResNet from_json): depth/size limits, type and range checks.
#include "models/bert.h"
#include "models/hf_import.h"
#include "models/resnet.h"
#include "models/vit.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = lb::fuzz::scratch() / "hf";
  lb::fuzz::write_file(dir / "config.json", data, size);
  lb::fuzz::expect_clean([&] {
    const nlohmann::json j = lb::models::read_hf_config(dir.string());
    lb::fuzz::expect_clean([&] { (void)lb::models::BertConfig::from_json(j, "config.json"); });
    lb::fuzz::expect_clean([&] { (void)lb::models::ViTConfig::from_json(j, "config.json"); });
    lb::fuzz::expect_clean([&] { (void)lb::models::ResNetConfig::from_json(j, "config.json"); });
  });
  return 0;
}
