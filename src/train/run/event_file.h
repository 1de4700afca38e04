// Internal: a TensorBoard event file, written without TensorFlow: TFRecord framing (length,
// masked CRC-32C of it, the record, masked CRC-32C of that) around Event protocol buffers
// encoded by hand (tensorflow/core/util/event.proto: wall_time = 1, step = 2, file_version =
// 3, summary = 5 with Summary.Value {tag = 1, simple_value = 2}, session_log = 6). Only
// scalars, which is what TensorBoard's scalar dashboard and `tensorboard --logdir` read.
#pragma once
#include <cstdint>
#include <string>

namespace lb::train {

class EventFile {
 public:
  // Creates `path` (its first record names the format, "brain.Event:2").
  explicit EventFile(const std::string& path);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  void scalar(const std::string& tag, int64_t step, double value, double wall_time);
  // A restart at `step` (a resumed run): TensorBoard drops the earlier files' points past it.
  void session_start(int64_t step, double wall_time);

 private:
  void write_event(const std::string& event);
  std::string path_;
  int fd_ = -1;
};

// CRC-32C (Castagnoli) of n bytes, as TFRecord frames use it (before masking).
uint32_t crc32c(const void* data, size_t n);

}  // namespace lb::train
