// Device parsing.
#include "lb/core/device.h"

#include "lb/core/error.h"

namespace lb {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string idx = s.substr(5);
    LB_CHECK(!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos,
             "bad device '", s, "'; expected cpu, cuda or cuda:N");
    return cuda(std::stoi(idx));
  }
  LB_FAIL("bad device '", s, "'; expected cpu, cuda or cuda:N");
}

}  // namespace lb
