// The single-process group (size 1: collectives are no-ops) and world() (contract in
// lb/dist/process_group.h).
#include <cstdlib>

#include "lb/core/error.h"
#include "lb/dist/process_group.h"
#include "src/dist/mpi_group.h"

namespace lb::dist {

namespace {

class SingleGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  void all_reduce_sum(Tensor&, const std::string&) override {}
  void all_reduce_sum(std::vector<double>&, const std::string&) override {}
  void broadcast(Tensor&, int, const std::string&) override {}
  void broadcast(std::string&, int, const std::string&) override {}
  Tensor all_gather(const Tensor& t, const std::string&) override { return t.unsqueeze(0).contiguous(); }
  void barrier(const std::string&) override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

ProcessGroup& single_process() {
  static SingleGroup g;
  return g;
}

ProcessGroup& world() {
  static ProcessGroup* const g = [] {
    if (!launched_by_mpi()) return &single_process();
    LB_CHECK(mpi_compiled(), "this process was started by mpirun, but leanback was built without MPI "
                             "(install libopenmpi-dev and rebuild: tools/build.sh)");
    return &mpi_world();
  }();
  return *g;
}

}  // namespace lb::dist
