// safetensors (the Hugging Face weight format): 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}},
// then the raw little-endian data. Reading validates everything (header size, JSON, dtypes,
// offsets in range, no overlap, sizes matching shapes) and throws lb::Error naming the file.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::io {

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  const Tensor* find(const std::string& name) const;  // nullptr if absent
  const Tensor& at(const std::string& name) const;    // throws naming the file and key
  std::string path;
};

SafetensorsFile load_safetensors(const std::string& path);
// Throws lb::Error naming the file, the tensor and the element when a floating-point tensor
// of `f` holds NaN or inf: weights read from outside a checkpoint (a Hugging Face directory,
// an export, a PEFT adapter) are refused as a checkpoint's are, before they train or predict.
void check_finite(const SafetensorsFile& f);
// Writes atomically (temp file in the same directory, fsync, rename).
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace lb::io
