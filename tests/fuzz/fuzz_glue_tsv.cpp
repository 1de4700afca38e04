// libFuzzer harness: the GLUE TSV readers (data::read_glue). The first byte picks the task and
// split (all nine tasks' layouts, labeled and test splits); the rest is the file.
#include "lb/data/glue.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& tasks = lb::data::glue_tasks();
  const auto& task = tasks[data[0] % tasks.size()];
  const auto splits = task.splits();
  const std::string split = splits[(data[0] / tasks.size()) % splits.size()];
  const auto dir = lb::fuzz::scratch() / "glue" / task.name;
  lb::fuzz::write_file(dir / (split + ".tsv"), data + 1, size - 1);
  lb::fuzz::expect_clean([&] { (void)lb::data::read_glue(task, dir.string(), split); });
  return 0;
}
