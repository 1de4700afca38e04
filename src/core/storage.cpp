// Storage: allocation through the device's allocator, accounted under a tag.
#include "lb/core/storage.h"

#include "lb/core/error.h"

namespace lb {

#ifndef LEANBACK_WITH_CUDA
Allocator& cuda_allocator(int) { LB_FAIL("CUDA tensors need a build with LEANBACK_CUDA=ON"); }
#else
Allocator& cuda_allocator(int device);  // cuda/caching_allocator.cu
#endif

Allocator& allocator_for(Device d) { return d.is_cpu() ? cpu_allocator() : cuda_allocator(d.index); }

Storage::Storage(size_t nbytes, Device device, MemTag tag)
    : nbytes_(nbytes), device_(device), tag_(tag) {
  data_ = allocator_for(device).allocate(nbytes, tag);
}

Storage::~Storage() { allocator_for(device_).deallocate(data_, nbytes_, tag_); }

void Storage::set_tag(MemTag tag) {
  allocator_for(device_).retag_block(data_, nbytes_, tag_, tag);
  tag_ = tag;
}

}  // namespace lb
