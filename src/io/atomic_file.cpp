// Atomic file writes (see atomic_file.h).
#include "lb/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "lb/core/error.h"

namespace lb::io {

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    LB_CHECK(w > 0, "writing ", path, " failed: ", std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void write_atomic(const std::string& path, const std::function<void(int fd)>& write) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Unique temp name in the same directory (rename is atomic only within a file system),
  // created with O_EXCL; mode 0666 & ~umask like a plain open (mkstemp would give 0600).
  static std::atomic<uint64_t> counter{0};
  std::string tmpl;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    std::string name = ".";
    name += target.filename().string();
    name += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    tmpl = (dir / name).string();
    fd = ::open(tmpl.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    LB_CHECK(fd >= 0 || (errno == EEXIST && attempt < 100), "cannot create a temporary file next to ",
             path, ": ", std::strerror(errno), ". HINT: check that the directory exists and is writable");
  }
  try {
    write(fd);
    LB_CHECK(::fsync(fd) == 0, "fsync of ", tmpl, " failed: ", std::strerror(errno));
    LB_CHECK(::close(fd) == 0, "close of ", tmpl, " failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw;
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    LB_FAIL("cannot rename ", tmpl, " to ", path, ": ", std::strerror(err));
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // make the rename durable; best effort
    ::close(dfd);
  }
}

void write_text_atomic(const std::string& path, const std::string& text) {
  write_atomic(path, [&](int fd) { write_all(fd, text.data(), text.size(), path); });
}

}  // namespace lb::io
