// Libraries opened on first use (lb/core/shared_library.h): a missing one is a named error, a
// present one gives its symbols, and a CPU run (matmul, eigh, a backward) never maps cuBLAS,
// cuSOLVER or NCCL, which cost ~190 MB of resident memory at load when they were linked.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "lb/core/error.h"
#include "lb/core/shared_library.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

TEST(SharedLibrary, MissingLibraryNamesWhatNeedsItAndEachPathTried) {
  const std::string msg = testing::error_message([] {
    SharedLibrary::open({"libleanback_no_such_library.so.7"}, "/nonexistent/lib", "the test's kernel");
  });
  EXPECT_NE(msg.find("the test's kernel needs libleanback_no_such_library.so.7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/nonexistent/lib/libleanback_no_such_library.so.7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LD_LIBRARY_PATH"), std::string::npos) << msg;
}

TEST(SharedLibrary, GivesSymbolsAndNamesAMissingOne) {
  const SharedLibrary m = SharedLibrary::open({"libleanback_no_such_library.so.7", "libm.so.6"}, "", "cos");
  EXPECT_EQ(m.path(), "libm.so.6");
  auto* cos_fn = reinterpret_cast<double (*)(double)>(m.symbol("cos"));
  EXPECT_DOUBLE_EQ(cos_fn(0.0), 1.0);
  const std::string msg = testing::error_message([&] { m.symbol("leanback_no_such_symbol"); });
  EXPECT_NE(msg.find("libm.so.6 has no symbol leanback_no_such_symbol"), std::string::npos) << msg;
}

// The mapped files whose path contains `part`, one per line ("" when none).
std::string mapped(const std::string& part) {
  std::ifstream maps("/proc/self/maps");
  std::string line, hits;
  while (std::getline(maps, line))
    if (line.find(part) != std::string::npos) hits += line + "\n";
  return hits;
}

TEST(SharedLibrary, CpuWorkMapsNoCudaMathLibraryNorNccl) {
  Tensor a = testing::randn({16, 16}, 1).set_requires_grad();
  Tensor s = matmul(a, a.transpose(0, 1));
  sum(s).backward();
  const EighResult e = eigh(s.detach());
  EXPECT_EQ(e.eigenvalues.numel(), 16);
  for (const char* lib : {"libcublas", "libcusolver", "libcusparse", "libnccl", "libcurand"})
    EXPECT_EQ(mapped(lib), "") << lib << " is mapped by a CPU-only process";
}

}  // namespace
}  // namespace lb
