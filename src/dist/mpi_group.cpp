// The MPI process group (Open MPI; contract in lb/dist/process_group.h). MPI is initialised
// on first use with MPI_THREAD_FUNNELED (only the main thread calls MPI; OpenMP threads never
// do) and finalised at exit. Errors return (MPI_ERRORS_RETURN) and become lb::Error naming
// the rank, the collective and its payload. A watchdog thread ends the job when a collective
// has not completed within LEANBACK_DIST_TIMEOUT seconds (default 1800): a peer that died
// or stopped must not leave the others waiting forever.
#include "src/dist/mpi_group.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <mutex>
#include <thread>

#include "lb/core/error.h"
#include "src/dist/rendezvous.h"

#if LEANBACK_MPI
// The C API only (Open MPI's deprecated C++ bindings would need libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace lb::dist {

#if LEANBACK_MPI
bool mpi_compiled() { return true; }

namespace {

MPI_Datatype mpi_type(DType t, const std::string& what) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I64: return MPI_INT64_T;
    case DType::I32: return MPI_INT32_T;
    default: LB_FAIL("all_reduce of ", what, ": dtype ", dtype_name(t), " is not summable (f32, f64, i32, i64)");
  }
}

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      std::atexit([] {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
      });
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    timeout_s_ = dist_timeout_s();
    std::thread([this] { watchdog(); }).detach();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce_sum(Tensor& t, const std::string& what) override {
    check_tensor(t, "all_reduce", what);
    const MPI_Datatype type = mpi_type(t.dtype(), what);
    chunked(t, [&](char* p, int n) {
      return MPI_Allreduce(MPI_IN_PLACE, p, n, type, MPI_SUM, MPI_COMM_WORLD);
    }, "MPI_Allreduce", what);
  }

  int64_t all_reduce_sum_start(Tensor& t, const std::string& what) override {
    check_tensor(t, "all_reduce", what);
    const size_t n = t.nbytes() / dtype_size(t.dtype());
    LB_CHECK(n < static_cast<size_t>(INT_MAX), "rank ", rank_, ": all_reduce of ", what, ": ", n,
             " elements is more than one non-blocking MPI call carries");
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(n), mpi_type(t.dtype(), what), MPI_SUM,
                         MPI_COMM_WORLD, &req),
          "MPI_Iallreduce", what);
    const int64_t id = next_request_++;
    pending_.emplace(id, Pending{req, what});
    return id;
  }

  void wait(int64_t request) override {
    auto it = pending_.find(request);
    LB_CHECK(it != pending_.end(), "rank ", rank_, ": wait on unknown request ", request);
    Guard g(*this, "MPI_Wait", it->second.what);
    check(MPI_Wait(&it->second.req, MPI_STATUS_IGNORE), "MPI_Wait", it->second.what);
    pending_.erase(it);
  }

  void progress() override {
    for (auto& [id, p] : pending_) {
      int done = 0;
      check(MPI_Test(&p.req, &done, MPI_STATUS_IGNORE), "MPI_Test", p.what);
      (void)id;
    }
  }

  void all_reduce_sum(std::vector<double>& v, const std::string& what) override {
    Guard g(*this, "MPI_Allreduce", what);
    check(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_SUM,
                        MPI_COMM_WORLD),
          "MPI_Allreduce", what);
  }

  void broadcast(Tensor& t, int root, const std::string& what) override {
    check_tensor(t, "broadcast", what);
    chunked(t, [&](char* p, int n) { return MPI_Bcast(p, n, MPI_BYTE, root, MPI_COMM_WORLD); },
            "MPI_Bcast", what, /*bytes=*/true);
  }

  void broadcast(std::string& s, int root, const std::string& what) override {
    Guard g(*this, "MPI_Bcast", what);
    long long n = static_cast<long long>(s.size());
    check(MPI_Bcast(&n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), "MPI_Bcast", what);
    LB_CHECK(n >= 0 && n < INT_MAX, "rank ", rank_, ": broadcast of ", what, ": bad length ", n);
    s.resize(static_cast<size_t>(n));
    check(MPI_Bcast(s.data(), static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast", what);
  }

  Tensor all_gather(const Tensor& t, const std::string& what) override {
    const Tensor c = t.contiguous();
    check_tensor(c, "all_gather", what);
    Tensor out = gathered_empty(c);
    LB_CHECK(c.nbytes() < static_cast<size_t>(INT_MAX), "rank ", rank_, ": all_gather of ", what,
             ": ", c.nbytes(), " bytes per rank is more than one MPI call carries");
    Guard g(*this, "MPI_Allgather", what);
    check(MPI_Allgather(c.raw_data(), static_cast<int>(c.nbytes()), MPI_BYTE, out.raw_data(),
                        static_cast<int>(c.nbytes()), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgather", what);
    return out;
  }

  void barrier(const std::string& what) override {
    Guard g(*this, "MPI_Barrier", what);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", what);
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // Marks a collective in flight for the watchdog.
  struct Guard {
    Guard(MpiGroup& g, const char* op, const std::string& what) : g_(g) {
      g_.set_current(std::string(op) + " of " + what);
    }
    ~Guard() { g_.clear_current(); }
    MpiGroup& g_;
  };

  void set_current(std::string s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = std::move(s);
    }
    started_.store(now_s(), std::memory_order_release);
  }
  void clear_current() { started_.store(-1.0, std::memory_order_release); }

  static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  void watchdog() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const double s = started_.load(std::memory_order_acquire);
      if (s < 0 || now_s() - s < timeout_s_) continue;
      std::string what;
      {
        std::lock_guard<std::mutex> lock(mu_);
        what = current_;
      }
      std::fprintf(stderr,
                   "leanback: rank %d/%d: %s did not complete within %.0f s (LEANBACK_DIST_TIMEOUT): "
                   "another rank has died or stopped; ending the job\n",
                   rank_, size_, what.c_str(), timeout_s_);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
      std::_Exit(3);
    }
  }

  void check(int rc, const char* op, const std::string& what) const {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    LB_FAIL("rank ", rank_, "/", size_, ": ", op, " of ", what, " failed: ", std::string(msg, len));
  }

  void check_tensor(const Tensor& t, const char* op, const std::string& what) const {
    LB_CHECK(t.defined(), "rank ", rank_, ": ", op, " of ", what, ": undefined tensor");
    LB_CHECK(t.device().is_cpu(), "rank ", rank_, ": ", op, " of ", what,
             ": the MPI backend carries CPU tensors (NCCL carries CUDA ones)");
    LB_CHECK(t.is_contiguous(), "rank ", rank_, ": ", op, " of ", what, ": tensor must be contiguous");
  }

  // Runs op over the tensor in pieces of at most INT_MAX elements (MPI counts are int).
  template <typename Op>
  void chunked(Tensor& t, Op op, const char* name, const std::string& what, bool bytes = false) {
    Guard g(*this, name, what);
    const size_t elem = bytes ? 1 : dtype_size(t.dtype());
    const size_t total = t.nbytes() / elem;
    char* p = static_cast<char*>(t.raw_data());
    constexpr size_t kMax = size_t{1} << 30;
    for (size_t i = 0; i < total; i += kMax) {
      const size_t n = std::min(kMax, total - i);
      check(op(p + i * elem, static_cast<int>(n)), name, what);
    }
  }

  struct Pending {
    MPI_Request req;
    std::string what;
  };
  std::map<int64_t, Pending> pending_;
  int64_t next_request_ = 1;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 1800.0;
  std::atomic<double> started_{-1.0};
  std::mutex mu_;
  std::string current_;
};

}  // namespace

ProcessGroup& mpi_world() {
  static MpiGroup g;
  return g;
}

#else  // !LEANBACK_MPI

bool mpi_compiled() { return false; }

ProcessGroup& mpi_world() {
  LB_FAIL("leanback was built without MPI (install libopenmpi-dev and rebuild: tools/build.sh)");
}

#endif

}  // namespace lb::dist
