// hub_name_of / local_model_for (see model_name.h).
#include "lb/train/export/model_name.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "lb/core/error.h"
#include "lb/io/printable.h"
#include "lb/train/config.h"

namespace lb::train {

namespace fs = std::filesystem;

std::string hub_name_of(const std::string& dir) {
  const fs::path file = fs::path(dir) / kHubNameFile;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return "";
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string name = ss.str();
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  // Hugging Face repository ids: "org/name" of letters, digits, '-', '_', '.'.
  static const std::regex id("[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*");
  LB_CHECK(std::regex_match(name, id), file.string(), ": expected one Hugging Face model name (org/model), got '",
           io::printable(name.substr(0, 200)), "'");
  return name;
}

std::string local_model_for(const std::string& name) {
  const fs::path root = leanback_home();
  std::error_code ec;
  if (root.empty() || !fs::is_directory(root / "models", ec)) return "";
  for (const auto& entry : fs::directory_iterator(root / "models", ec)) {
    if (!entry.is_directory(ec)) continue;
    try {
      if (hub_name_of(entry.path().string()) == name) return entry.path().string();
    } catch (const Error&) {
      // Another directory's broken marker is not this lookup's business.
    }
  }
  return "";
}

}  // namespace lb::train
