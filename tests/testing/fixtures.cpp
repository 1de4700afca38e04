// Golden fixture loading (separate object: only tests that use fixtures link the reader).
#include <filesystem>

#include "testing/testing.h"

namespace lb::testing {

io::SafetensorsFile load_fixture(const std::string& name) {
  const std::string path = fixture_path(name + ".safetensors");
  LB_CHECK(std::filesystem::exists(path), "golden fixture ", path,
           " is missing. HINT: run /usr/bin/python3 tools/gen_golden.py and commit tests/fixtures/");
  return io::load_safetensors(path);
}

}  // namespace lb::testing
