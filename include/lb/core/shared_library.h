// A shared library opened when first needed (dlopen), not at start-up. The CUDA math
// libraries and NCCL cost ~190 MB of resident memory as soon as they are mapped (cuBLASLt
// alone ~150 MB), so a CPU-only run, `--help` and `info` must never load them; the kernels that
// call them load them on their first call through the API tables below.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace lb {

class SharedLibrary {
 public:
  // Opens the first of `sonames` that loads, searched as dlopen searches (LD_LIBRARY_PATH, the
  // binary's RUNPATH, ldconfig's cache), then in `fallback_dir` (the directory the build found
  // the library in; may be empty). Throws naming what the library is needed for, each name
  // tried and dlopen's reason. The handle is never closed: CUDA's libraries do not survive
  // being unloaded before their last handle is destroyed at exit.
  static SharedLibrary open(const std::vector<std::string>& sonames, const std::string& fallback_dir,
                            const std::string& needed_for);
  // The address of `name`; throws naming the library and the symbol (a library older than the
  // headers leanback was built with).
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

}  // namespace lb

// An API table: one function pointer per entry of an X-macro list, typed by the library's own
// header (so a signature cannot drift) and named as the header names it. A header that maps a
// name to a versioned symbol by macro (cublasCreate -> cublasCreate_v2) maps the member and the
// looked-up symbol alike, so call sites read api.cublasCreate(...).
#define LB_API_STRINGIFY_(x) #x
#define LB_API_STRINGIFY(x) LB_API_STRINGIFY_(x)
#define LB_API_MEMBER(fn) decltype(&::fn) fn = nullptr;
#define LB_API_LOAD(fn) api.fn = reinterpret_cast<decltype(&::fn)>(lib.symbol(LB_API_STRINGIFY(fn)));
