// Shared by the libFuzzer harnesses: the readers under test take file paths, so each input is
// written to a per-process scratch directory first. Only lb::Error (the readers' documented
// way to reject input) is caught; anything else — a crash, a sanitizer report, another
// exception type — is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "lb/core/error.h"

namespace lb::fuzz {

// The scratch directory of this process (created once, under $TMPDIR or /tmp).
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(t && *t ? t : "/tmp") /
                              ("lb_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& p, const uint8_t* data, size_t size) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// Runs f, treating lb::Error as a clean rejection.
template <typename F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const lb::Error&) {
  }
}

}  // namespace lb::fuzz
