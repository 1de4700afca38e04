// libFuzzer harness: a training config (train::load_config: JSON limits, every section's typed
// keys, the backward policy, the freeze globs). An input whose first line starts with "--set "
// gives that line's rest as one override (key=value) and the remainder as the config.
#include <string>
#include <vector>

#include "lb/train/config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> sets;
  if (text.rfind("--set ", 0) == 0) {
    const size_t nl = text.find('\n');
    sets.push_back(text.substr(6, nl == std::string::npos ? std::string::npos : nl - 6));
    text = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  const auto path = lb::fuzz::scratch() / "config.json";
  lb::fuzz::write_file(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  lb::fuzz::expect_clean([&] { (void)lb::train::load_config(path.string(), sets); });
  return 0;
}
