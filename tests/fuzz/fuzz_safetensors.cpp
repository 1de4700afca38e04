// libFuzzer harness: the safetensors reader (io::load_safetensors) on arbitrary bytes. A file
// it accepts is read in full (every tensor's bytes summed), so an accepted out-of-bounds
// offset shows up under AddressSanitizer.
#include "lb/io/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = lb::fuzz::scratch() / "in.safetensors";
  lb::fuzz::write_file(path, data, size);
  lb::fuzz::expect_clean([&] {
    const lb::io::SafetensorsFile f = lb::io::load_safetensors(path.string());
    volatile uint64_t sum = 0;
    for (const auto& [name, t] : f.tensors) {
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      for (size_t i = 0; i < t.nbytes(); ++i) sum = sum + p[i];
    }
  });
  return 0;
}
