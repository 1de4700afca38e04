// Storage: one contiguous block of bytes on a device, owned by its allocator. Tensors are
// views onto a Storage (shape, strides, offset); several tensors may share one.
#pragma once
#include <cstddef>
#include <memory>

#include "lb/core/allocator.h"
#include "lb/core/device.h"

namespace lb {

class Storage {
 public:
  Storage(size_t nbytes, Device device, MemTag tag);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  MemTag tag() const { return tag_; }
  void set_tag(MemTag tag);  // re-accounts the bytes under the new tag

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  MemTag tag_;
};

Allocator& allocator_for(Device d);

}  // namespace lb
