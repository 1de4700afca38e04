// EventFile (see event_file.h).
#include "src/train/run/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "lb/core/error.h"
#include "lb/io/atomic_file.h"

namespace lb::train {

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> a{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
      a[i] = c;
    }
    return a;
  }();
  return t;
}

// TFRecord's masking, so that a CRC of data holding CRCs stays well mixed.
uint32_t masked_crc(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Protocol buffer wire format: varints, and fields as (number << 3 | wire type) keys.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
template <typename T>
void little_endian(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86-64 and AArch64 Linux are little-endian
  out.append(b, sizeof(T));
}
void bytes_field(std::string& out, int field, const std::string& bytes) {
  varint(out, static_cast<uint64_t>(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}
std::string event_head(int64_t step, double wall_time) {
  std::string e;
  varint(e, 1 << 3 | 1);  // wall_time: double
  little_endian(e, wall_time);
  varint(e, 2 << 3 | 0);  // step: int64
  varint(e, static_cast<uint64_t>(step));
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = crc_table()[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

EventFile::EventFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  LB_CHECK(fd_ >= 0, "cannot write ", path, ": ", std::strerror(errno));
  std::string e = event_head(0, 0.0);
  bytes_field(e, 3, "brain.Event:2");
  write_event(e);
}

EventFile::~EventFile() {
  if (fd_ >= 0) ::close(fd_);
}

void EventFile::scalar(const std::string& tag, int64_t step, double value, double wall_time) {
  std::string v;
  bytes_field(v, 1, tag);
  varint(v, 2 << 3 | 5);  // simple_value: float
  little_endian(v, static_cast<float>(value));
  std::string summary;
  bytes_field(summary, 1, v);
  std::string e = event_head(step, wall_time);
  bytes_field(e, 5, summary);
  write_event(e);
}

void EventFile::session_start(int64_t step, double wall_time) {
  std::string log;
  varint(log, 1 << 3 | 0);  // status: START
  varint(log, 1);
  std::string e = event_head(step, wall_time);
  bytes_field(e, 6, log);
  write_event(e);
}

void EventFile::write_event(const std::string& event) {
  std::string r;
  const uint64_t len = event.size();
  little_endian(r, len);
  little_endian(r, masked_crc(&len, sizeof len));
  r += event;
  little_endian(r, masked_crc(event.data(), event.size()));
  io::write_all(fd_, r.data(), r.size(), path_);
}

}  // namespace lb::train
