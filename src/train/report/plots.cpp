// draw_plots (see plots.h): writes the embedded script to a temporary file and runs it.
#include "lb/train/report/plots.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "lb/core/error.h"
#include "lb/io/atomic_file.h"
#include "lb/train/run/output_dir.h"
#include "plot_report_py.h"

namespace lb::train {

namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Output and exit status of a shell command.
int run(const std::string& cmd, std::string* out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  out->clear();
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out->append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string python_with_matplotlib() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("LEANBACK_PYTHON"); p != nullptr && *p) candidates.emplace_back(p);
  candidates.emplace_back("python3");
  candidates.emplace_back("/usr/bin/python3");
  std::string out;
  for (const auto& c : candidates)
    if (run(quoted(c) + " -c 'import matplotlib' ", &out) == 0) return c;
  LB_FAIL("plots need Python 3 with matplotlib; none of $LEANBACK_PYTHON, python3, /usr/bin/python3 has it "
          "(Debian: apt-get install python3-matplotlib; or set LEANBACK_PYTHON)");
}
}  // namespace

std::vector<std::string> draw_plots(const std::string& dir) {
  const fs::path d(dir);
  LB_CHECK(fs::exists(d / "compare.json") || fs::exists(d / "metrics.jsonl"), dir,
           ": neither a compare directory (compare.json) nor a run directory (metrics.jsonl)");
  const std::string python = python_with_matplotlib();
  const fs::path script = fs::temp_directory_path() / ("leanback_plot_" + std::to_string(::getpid()) + ".py");
  io::write_text_atomic(script.string(), kPlotReportPy);
  std::string out;
  const int rc = run(quoted(python) + " " + quoted(script.string()) + " " + quoted(dir), &out);
  std::error_code ec;
  fs::remove(script, ec);
  LB_CHECK(rc == 0, "plotting ", dir, " failed (", python, " exit status ", rc, "):\n", out);
  std::vector<std::string> files;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("wrote ", 0) == 0) files.push_back(l.substr(6));
  // In a run or compare directory, --overwrite may delete them again (output_dir.h).
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(fs::relative(f, d).generic_string());
  record_written(d, names);
  return files;
}

}  // namespace lb::train
