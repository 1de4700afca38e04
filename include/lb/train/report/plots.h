// `leanback plot`: figures of a run directory (training loss and eval metric over steps) or
// of a compare directory (those per strategy, bars of metric / saved bytes / step time, and
// per-layer saved bytes and INSTANT ranks), drawn by matplotlib from the JSON files alone.
// The script (src/train/report/plot_report.py) is embedded in the binary and run with the first
// Python that has matplotlib: $LEANBACK_PYTHON, python3, /usr/bin/python3 (Debian:
// apt-get install python3-matplotlib; tools/setup.sh installs it).
#pragma once
#include <string>
#include <vector>

namespace lb::train {

// Writes DIR/plots/*.png and returns their paths. Throws lb::Error naming what is missing
// (no run or compare files in DIR, no Python with matplotlib) or the script's error.
std::vector<std::string> draw_plots(const std::string& dir);

}  // namespace lb::train
