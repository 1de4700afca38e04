#include "lb/core/shared_library.h"

#include <dlfcn.h>

#include <filesystem>

#include "lb/core/error.h"

namespace lb {

SharedLibrary SharedLibrary::open(const std::vector<std::string>& sonames, const std::string& fallback_dir,
                                  const std::string& needed_for) {
  std::string tried;
  auto attempt = [&](const std::string& path) -> void* {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "not loaded");
    }
    return h;
  };
  for (const std::string& name : sonames)
    if (void* h = attempt(name)) return SharedLibrary(h, name);
  if (!fallback_dir.empty())
    for (const std::string& name : sonames) {
      const std::string path = (std::filesystem::path(fallback_dir) / name).string();
      if (void* h = attempt(path)) return SharedLibrary(h, path);
    }
  LB_FAIL(needed_for, " needs ", sonames.front(), ", which could not be loaded:", tried,
          "\nInstall it (the CUDA toolkit or its pip wheel) or add its directory to LD_LIBRARY_PATH.");
}

void* SharedLibrary::symbol(const char* name) const {
  dlerror();
  void* p = dlsym(handle_, name);
  LB_CHECK(p != nullptr, path_, " has no symbol ", name,
           ": the library is older than the headers leanback was built with; install a matching version");
  return p;
}

}  // namespace lb
