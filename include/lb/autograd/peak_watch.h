// Where a step's activation peak was set (leanback plan --memory). While a PeakWatch lives, the
// tape checks at each node it records and after each node backward applies (before that node
// frees what it kept) whether the allocator's activation peak rose since the last check; if it
// did, it notes where: the phase, the node's op and module, the peak then, and what the tape
// kept at that moment (saved_breakdown()). The last note is where the peak was set, to within
// one node (the rise happened while that node's op or backward ran). A rise no node boundary
// saw (the loss's last ops, gradient clipping, the optimizer step) is noted by check().
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "lb/autograd/saved_breakdown.h"
#include "lb/core/allocator.h"

namespace lb::autograd {

class Node;

struct PeakSite {
  // "forward", "backward", "recomputation" (a block's forward run again in backward), or the
  // phase given to check().
  std::string phase;
  std::string op, module;  // the node ("" where check() noted it)
  int64_t activation_bytes = 0;  // the activation peak when noted
  std::vector<SavedEntry> kept;  // what the tape kept then
};

class PeakWatch {
 public:
  // Watches `allocator` from now on (one watch at a time, on the thread that runs the step).
  // with_kept = false: the place only, not what was kept (cheap enough for every step).
  explicit PeakWatch(const Allocator& allocator, bool with_kept = true);
  ~PeakWatch();
  PeakWatch(const PeakWatch&) = delete;
  PeakWatch& operator=(const PeakWatch&) = delete;

  // Notes a rise since the last check under `phase` (no node).
  void check(const std::string& phase);
  // The place of the highest peak seen so far (none: the peak has not risen while watched).
  const std::optional<PeakSite>& site() const { return site_; }

  // Called by the tape: `node` was just recorded (applied = false) or applied in backward.
  static void at_node(const Node& node, bool applied);

 private:
  void note(std::string phase, const Node* node);
  const Allocator& allocator_;
  bool with_kept_ = true;
  int64_t rises_ = 0;
  std::optional<PeakSite> site_;
};

}  // namespace lb::autograd
