// Atomic file replacement: write to a temp file in the target's directory, fsync, rename
// over the target, fsync the directory. Readers see the old file or the new one, never a
// torn mix; on failure the temp file is removed and the old file is untouched.
#pragma once
#include <functional>
#include <string>

namespace lb::io {

// `write` receives the open temp file's descriptor and writes everything to it.
void write_atomic(const std::string& path, const std::function<void(int fd)>& write);
void write_text_atomic(const std::string& path, const std::string& text);

// Writes all of `n` bytes to fd (retrying short writes); throws lb::Error naming `path`.
void write_all(int fd, const void* data, size_t n, const std::string& path);

}  // namespace lb::io
