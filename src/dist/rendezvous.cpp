// Environment and file rendezvous for non-MPI groups (contract in src/dist/rendezvous.h).
#include "src/dist/rendezvous.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lb/core/error.h"

namespace lb::dist {

namespace {

// An integer environment variable in [lo, hi], or `fallback` when unset.
int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  LB_CHECK(end && *end == '\0' && x >= lo && x <= hi, "environment variable ", name, "='", v,
           "' must be an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(x);
}

}  // namespace

RankInfo rank_info_from_env() {
  RankInfo r;
  const bool has_rank = std::getenv("RANK") != nullptr, has_size = std::getenv("WORLD_SIZE") != nullptr;
  LB_CHECK(has_rank == has_size, "environment: ", has_rank ? "RANK" : "WORLD_SIZE", " is set but ",
           has_rank ? "WORLD_SIZE" : "RANK", " is not (set both, as torchrun does, or neither)");
  if (!has_rank) return r;
  r.from_env = true;
  r.size = env_int("WORLD_SIZE", 1, 1, 1 << 20);
  r.rank = env_int("RANK", 0, 0, r.size - 1);
  r.local_rank = env_int("LOCAL_RANK", r.rank, 0, 1 << 20);
  return r;
}

std::string exchange_through_file(const std::string& path, int rank, const std::string& value,
                                  double timeout_s) {
  namespace fs = std::filesystem;
  LB_CHECK(!path.empty(), "rank ", rank, ": the rendezvous file path is empty (LEANBACK_NCCL_ID_FILE)");
  if (rank == 0) {
    // Never replaces a file: the value goes to a fresh temporary file of ours (O_EXCL), which
    // is then hard-linked as `path` (fails, rather than overwrites, if `path` exists).
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    LB_CHECK(fd >= 0, "rank 0: cannot create rendezvous file ", tmp, ": ", std::strerror(errno));
    const bool written = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
    const bool closed = ::close(fd) == 0;
    const int linked = written && closed ? ::link(tmp.c_str(), path.c_str()) : -1;
    const int link_errno = errno;
    ::unlink(tmp.c_str());  // ours (created above)
    LB_CHECK(written && closed, "rank 0: writing rendezvous file ", tmp, " failed");
    LB_CHECK(linked == 0 || link_errno != EEXIST, "rank 0: rendezvous file ", path, " already exists (left by an "
             "earlier job?): remove it or set LEANBACK_NCCL_ID_FILE to a fresh path");
    LB_CHECK(linked == 0, "rank 0: cannot create rendezvous file ", path, ": ", std::strerror(link_errno));
    return value;
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f.good()) {
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    LB_CHECK(waited < timeout_s, "rank ", rank, ": rendezvous file ", path, " did not appear within ",
             timeout_s, " s (LEANBACK_DIST_TIMEOUT): is rank 0 running, with the same LEANBACK_NCCL_ID_FILE?");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void remove_rendezvous_file(const std::string& path, const std::string& value) {
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) return;
  std::stringstream ss;
  ss << f.rdbuf();
  f.close();
  if (ss.str() != value) return;  // not the file rank 0 wrote: never ours to delete
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

std::string hex_encode(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

std::vector<uint8_t> hex_decode(const std::string& hex, size_t n, const std::string& what) {
  LB_CHECK(hex.size() == 2 * n, what, ": expected ", 2 * n, " hex digits, got ", hex.size());
  auto nibble = [&](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
    LB_FAIL(what, ": '", c, "' is not a hex digit");
  };
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  return out;
}

double dist_timeout_s() {
  const char* t = std::getenv("LEANBACK_DIST_TIMEOUT");
  if (!t || !*t) return 1800.0;
  char* end = nullptr;
  const double s = std::strtod(t, &end);
  LB_CHECK(end && *end == '\0' && s > 0, "environment variable LEANBACK_DIST_TIMEOUT='", t,
           "' must be a positive number of seconds");
  return s;
}

}  // namespace lb::dist
