// Process groups for data-parallel training, on an existing engine (no transport of our own):
// MPI for CPU processes (Open MPI from Debian), one process = one rank. A run launched by
// `mpirun -np N` (or `leanback train --nproc N`, which launches mpirun) gets an MPI group of N
// ranks from world(); anything else gets the single-process group, whose collectives are
// no-ops. Collectives are blocking unless stated, act in place on contiguous CPU tensors, and
// every failure names the rank, the collective and what it carried (the `what` argument).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "lb/core/tensor.h"

namespace lb::dist {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi"

  // Element-wise sum over ranks (f32, f64, i64), result on every rank.
  virtual void all_reduce_sum(Tensor& t, const std::string& what) = 0;
  // Non-blocking all_reduce_sum: starts it and returns a request id for wait(). The tensor
  // must stay alive and untouched until then. progress() lets started operations advance
  // (MPI moves non-blocking collectives only inside MPI calls).
  virtual int64_t all_reduce_sum_start(Tensor& t, const std::string& what) {
    all_reduce_sum(t, what);
    return 0;
  }
  virtual void wait(int64_t /*request*/) {}
  virtual void progress() {}
  // The same on a few doubles (losses, counts).
  virtual void all_reduce_sum(std::vector<double>& v, const std::string& what) = 0;
  // Rank root's bytes to every rank (any dtype; shapes must already agree).
  virtual void broadcast(Tensor& t, int root, const std::string& what) = 0;
  // Rank root's string to every rank (e.g. a JSON decision such as HOT's quantiser choice).
  virtual void broadcast(std::string& s, int root, const std::string& what) = 0;
  // Every rank's tensor (same shape and dtype on all), concatenated along a new leading axis.
  virtual Tensor all_gather(const Tensor& t, const std::string& what) = 0;
  virtual void barrier(const std::string& what) = 0;
  // Ends the whole job after an error on this rank (so the others do not wait in a collective).
  [[noreturn]] virtual void abort(int code) = 0;

  bool is_main() const { return rank() == 0; }

 protected:
  // all_gather's result for a contiguous t: (size(), t's shape), uninitialised, on t's device.
  Tensor gathered_empty(const Tensor& t) const {
    Shape shape = t.shape();
    shape.insert(shape.begin(), size());
    return Tensor::empty(shape, t.dtype(), t.device());
  }
};

// The process's group: MPI when launched by mpirun (and built with MPI), else single.
ProcessGroup& world();

// A group of one (what world() is without mpirun): for running a single-process reference
// inside an MPI job (the tests do).
ProcessGroup& single_process();

// Whether this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE or
// PMIX_RANK set), and whether this build has the MPI backend.
bool launched_by_mpi();
bool mpi_compiled();

}  // namespace lb::dist
