// PeakWatch: where the activation peak was set (see peak_watch.h).
#include "lb/autograd/peak_watch.h"

#include <atomic>

#include "lb/autograd/node.h"
#include "lb/autograd/recompute.h"
#include "lb/core/error.h"

namespace lb::autograd {

namespace {
std::atomic<PeakWatch*> g_watch{nullptr};
}  // namespace

PeakWatch::PeakWatch(const Allocator& allocator, bool with_kept)
    : allocator_(allocator), with_kept_(with_kept), rises_(allocator.activation_peak_rises()) {
  PeakWatch* none = nullptr;
  LB_CHECK(g_watch.compare_exchange_strong(none, this), "internal: a second PeakWatch while one is active");
}

PeakWatch::~PeakWatch() { g_watch.store(nullptr); }

void PeakWatch::note(std::string phase, const Node* node) {
  const int64_t rises = allocator_.activation_peak_rises();
  if (rises == rises_) return;
  rises_ = rises;
  PeakSite s;
  s.phase = std::move(phase);
  if (node != nullptr) {
    s.op = node->name();
    s.module = node->module_scope();
  }
  s.activation_bytes = allocator_.stats().activation_peak;
  if (with_kept_) s.kept = saved_breakdown();
  site_ = std::move(s);
}

void PeakWatch::check(const std::string& phase) { note(phase, nullptr); }

void PeakWatch::at_node(const Node& node, bool applied) {
  PeakWatch* w = g_watch.load(std::memory_order_relaxed);
  if (w == nullptr) return;
  w->note(applied ? "backward" : recomputing() ? "recomputation" : "forward", &node);
}

}  // namespace lb::autograd
