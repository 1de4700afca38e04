// libFuzzer harness: a user's own text files (data::read_text_file, read_text_lines). The
// first byte picks the format (CSV, TSV, JSON Lines, plain lines), one or two text columns and
// whether the label is required; the rest is the file, whose header names columns "a", "b", "y".
#include "lb/data/text_file.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int format = data[0] % 4;
  const bool pair = (data[0] >> 2) & 1, label_required = (data[0] >> 3) & 1;
  const auto path = lb::fuzz::scratch() / "text_file" / "input";
  lb::fuzz::write_file(path, data + 1, size - 1);
  lb::data::TextColumns cols{pair ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"a"}, "y"};
  lb::fuzz::expect_clean([&] {
    if (format == 3) (void)lb::data::read_text_lines(path.string(), pair);
    else (void)lb::data::sorted_label_names(
        lb::data::read_text_file(path.string(), static_cast<lb::data::TextFormat>(format), cols, label_required));
  });
  return 0;
}
