// Parameter counts a model config implies, computed before anything is allocated: a hostile
// or mistyped config (num_hidden_layers 2^40, hidden_size 2^31) is an error naming the file
// and its size keys, not an allocation loop the OOM killer ends or a wrapped byte count.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

namespace lb::models {

// A sum of products in unsigned 64-bit arithmetic that saturates at UINT64_MAX instead of
// wrapping (sizes are validated >= 0 before they get here).
class ParamCount {
 public:
  ParamCount& add(std::initializer_list<int64_t> factors);  // += the product
  ParamCount& add_times(const ParamCount& each, int64_t times);  // += each × times (layers)
  uint64_t total() const { return total_; }
  bool saturated() const { return total_ == UINT64_MAX; }

 private:
  uint64_t total_ = 0;
};

// Refuses, with an lb::Error naming `path` and `sizes` ("hidden_size 768, num_hidden_layers
// 12, ..."), a model whose float32 parameters alone would not fit in the machine's physical
// memory (sysconf _SC_PHYS_PAGES × _SC_PAGE_SIZE); training needs several times that.
void check_parameters_fit(const ParamCount& params, const std::string& path, const std::string& sizes);

}  // namespace lb::models
