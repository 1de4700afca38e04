// The NCCL process group (contract in lb/dist/nccl_group.h). Every NCCL and CUDA call is
// checked; failures name the rank, the call, the collective, its payload, and file:line.
#if LEANBACK_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "cuda/runtime.h"
#include "lb/core/cuda_runtime_info.h"
#include "lb/core/error.h"
#include "lb/core/shared_library.h"
#include "lb/dist/nccl_group.h"
#include "src/dist/rendezvous.h"

namespace lb::dist {

bool nccl_compiled() { return true; }

namespace {

// NCCL, loaded when the first NCCL group is made (lb/core/shared_library.h says why).
#define LB_NCCL_FUNCTIONS(X)                                                                          \
  X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommGetAsyncError) \
  X(ncclGetErrorString) X(ncclGetLastError) X(ncclAllReduce) X(ncclBroadcast) X(ncclAllGather)
struct NcclApi {
  LB_NCCL_FUNCTIONS(LB_API_MEMBER)
};
const NcclApi& nccl_lib() {
  static const NcclApi table = [] {
    const SharedLibrary lib = SharedLibrary::open({"libnccl.so." + std::to_string(NCCL_MAJOR)}, LEANBACK_NCCL_LIBDIR,
                                                  "the NCCL process group");
    NcclApi api;
    LB_NCCL_FUNCTIONS(LB_API_LOAD)
    return api;
  }();
  return table;
}

ncclDataType_t nccl_sum_type(DType t, int rank, const std::string& what) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::I64: return ncclInt64;
    case DType::I32: return ncclInt32;
    default:
      LB_FAIL("rank ", rank, ": all_reduce of ", what, ": dtype ", dtype_name(t),
              " is not summable (f32, f64, i32, i64)");
  }
}

class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(int device, int rank, int size, const ncclUniqueId& id, ProcessGroup* bootstrap)
      : device_(device), rank_(rank), size_(size), bootstrap_(bootstrap), timeout_s_(dist_timeout_s()) {
    cuda(cudaSetDevice(device_), "cudaSetDevice", "the communicator", __LINE__);
    // The collectives' own stream, ordered after the device's compute stream (cuda/runtime.h:
    // every kernel and copy runs there) by an event before each collective (after_compute).
    cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
         "the communicator", __LINE__);
    cuda(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming), "cudaEventCreateWithFlags",
         "the communicator", __LINE__);
    nccl(nccl_lib().ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank", "the communicator", __LINE__);
  }

  ~NcclGroup() override {
    for (auto& [id, p] : pending_) cudaEventDestroy(p.done);
    if (comm_) nccl_lib().ncclCommDestroy(comm_);
    if (computed_) cudaEventDestroy(computed_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce_sum(Tensor& t, const std::string& what) override { wait(all_reduce_sum_start(t, what)); }

  int64_t all_reduce_sum_start(Tensor& t, const std::string& what) override {
    check_tensor(t, "all_reduce", what);
    const ncclDataType_t type = nccl_sum_type(t.dtype(), rank_, what);
    after_compute(what);
    nccl(nccl_lib().ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), type, ncclSum, comm_, stream_),
         "ncclAllReduce", what, __LINE__);
    return enqueue_done("all_reduce of " + what);
  }

  void wait(int64_t request) override {
    auto it = pending_.find(request);
    LB_CHECK(it != pending_.end(), "rank ", rank_, ": wait on unknown request ", request);
    const Pending p = it->second;
    pending_.erase(it);
    finish(p);
  }

  void all_reduce_sum(std::vector<double>& v, const std::string& what) override {
    if (v.empty()) return;
    Tensor d = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(Device::cuda(device_));
    all_reduce_sum(d, what);
    const Tensor h = d.to(Device::cpu());
    std::memcpy(v.data(), h.raw_data(), v.size() * sizeof(double));
  }

  void broadcast(Tensor& t, int root, const std::string& what) override {
    check_tensor(t, "broadcast", what);
    check_root(root, what);
    after_compute(what);
    nccl(nccl_lib().ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, root, comm_, stream_), "ncclBroadcast",
         what, __LINE__);
    finish({enqueue_event(), "broadcast of " + what});
  }

  void broadcast(std::string& s, int root, const std::string& what) override {
    check_root(root, what);
    Tensor n = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(s.size())}, {1}).to(Device::cuda(device_));
    broadcast(n, root, what + " (length)");
    const int64_t len = n.to(Device::cpu()).item<int64_t>();
    LB_CHECK(len >= 0, "rank ", rank_, ": broadcast of ", what, ": bad length ", len);
    if (len == 0) {
      s.clear();
      return;
    }
    Tensor bytes = Tensor::empty({len}, DType::U8);
    if (rank_ == root) std::memcpy(bytes.raw_data(), s.data(), s.size());
    Tensor d = bytes.to(Device::cuda(device_));
    broadcast(d, root, what);
    const Tensor h = d.to(Device::cpu());
    s.assign(static_cast<const char*>(h.raw_data()), static_cast<size_t>(len));
  }

  Tensor all_gather(const Tensor& t, const std::string& what) override {
    const Tensor c = t.contiguous();
    check_tensor(c, "all_gather", what);
    Tensor out = gathered_empty(c);
    after_compute(what);
    nccl(nccl_lib().ncclAllGather(c.raw_data(), out.raw_data(), c.nbytes(), ncclUint8, comm_, stream_), "ncclAllGather", what,
         __LINE__);
    finish({enqueue_event(), "all_gather of " + what});
    return out;
  }

  void barrier(const std::string& what) override {
    Tensor one = Tensor::ones({1}, DType::F32).to(Device::cuda(device_));
    all_reduce_sum(one, "barrier (" + what + ")");
  }

  [[noreturn]] void abort(int code) override {
    if (comm_) nccl_lib().ncclCommAbort(comm_);
    comm_ = nullptr;
    if (bootstrap_ && bootstrap_->size() > 1) bootstrap_->abort(code);
    std::_Exit(code);
  }

 private:
  struct Pending {
    cudaEvent_t done;
    std::string what;
  };

  // The next collective starts after everything queued so far on the device's compute stream
  // (the kernels that wrote its input). Its results are read after finish() has waited for
  // it on the host, so later kernels need no event back.
  void after_compute(const std::string& what) {
    cuda(cudaEventRecord(computed_, ::lb::cuda::stream(device_)), "cudaEventRecord", what, __LINE__);
    cuda(cudaStreamWaitEvent(stream_, computed_, 0), "cudaStreamWaitEvent", what, __LINE__);
  }

  cudaEvent_t enqueue_event() {
    cudaEvent_t e = nullptr;
    cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", "a collective", __LINE__);
    cuda(cudaEventRecord(e, stream_), "cudaEventRecord", "a collective", __LINE__);
    return e;
  }

  int64_t enqueue_done(std::string what) {
    const int64_t id = next_request_++;
    pending_.emplace(id, Pending{enqueue_event(), std::move(what)});
    return id;
  }

  // Waits for a collective's event, watching NCCL's asynchronous errors and the timeout.
  void finish(const Pending& p) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t q = cudaEventQuery(p.done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        cudaEventDestroy(p.done);
        fail_and_abort("cudaEventQuery", p.what, cudaGetErrorString(q));
      }
      ncclResult_t async = ncclSuccess;
      nccl_lib().ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        cudaEventDestroy(p.done);
        fail_and_abort("ncclCommGetAsyncError", p.what, nccl_lib().ncclGetErrorString(async));
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s_) {
        cudaEventDestroy(p.done);
        fail_and_abort("the wait", p.what,
                       "did not complete within " + std::to_string(timeout_s_) +
                           " s (LEANBACK_DIST_TIMEOUT): another rank has died or stopped");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    cudaEventDestroy(p.done);
  }

  // The communicator cannot be used after a failed or stuck collective: abort it so no rank
  // stays inside NCCL, then report.
  [[noreturn]] void fail_and_abort(const char* call, const std::string& what, const std::string& why) {
    if (comm_) nccl_lib().ncclCommAbort(comm_);
    comm_ = nullptr;
    LB_FAIL("rank ", rank_, "/", size_, " (NCCL, cuda:", device_, "): ", call, " of ", what, " failed: ", why);
  }

  void nccl(ncclResult_t r, const char* call, const std::string& what, int line) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const char* last = comm_ ? nccl_lib().ncclGetLastError(comm_) : nullptr;
    LB_FAIL("rank ", rank_, "/", size_, " (NCCL, cuda:", device_, "): ", call, " of ", what, " failed: ",
            nccl_lib().ncclGetErrorString(r), last && *last ? std::string(" (") + last + ")" : std::string(), " at ",
            __FILE__, ":", line);
  }

  void cuda(cudaError_t e, const char* call, const std::string& what, int line) const {
    if (e == cudaSuccess) return;
    LB_FAIL("rank ", rank_, "/", size_, " (NCCL, cuda:", device_, "): ", call, " for ", what, " failed: ",
            cudaGetErrorString(e), " at ", __FILE__, ":", line);
  }

  void check_tensor(const Tensor& t, const char* op, const std::string& what) const {
    LB_CHECK(t.defined(), "rank ", rank_, ": ", op, " of ", what, ": undefined tensor");
    LB_CHECK(t.device() == Device::cuda(device_), "rank ", rank_, ": ", op, " of ", what, ": the NCCL group carries ",
             Device::cuda(device_).str(), " tensors, got one on ", t.device().str(),
             t.device().is_cpu() ? " (the MPI group carries CPU tensors)" : "");
    LB_CHECK(t.is_contiguous(), "rank ", rank_, ": ", op, " of ", what, ": tensor must be contiguous");
  }

  void check_root(int root, const std::string& what) const {
    LB_CHECK(root >= 0 && root < size_, "rank ", rank_, ": broadcast of ", what, ": root ", root,
             " is not a rank of this group of ", size_);
  }

  int device_, rank_, size_;
  ProcessGroup* bootstrap_;
  double timeout_s_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t computed_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::map<int64_t, Pending> pending_;
  int64_t next_request_ = 1;
};

int env_local_rank(int fallback) {
  for (const char* v : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  return fallback;
}

}  // namespace

int nccl_device_of_this_rank() {
  const int devices = cuda_device_count();
  LB_CHECK(devices > 0, "the NCCL group needs a CUDA device; this process sees none");
  const RankInfo env = world().size() == 1 ? rank_info_from_env() : RankInfo{};
  return (env.from_env ? env.local_rank : env_local_rank(world().rank())) % devices;
}

std::unique_ptr<ProcessGroup> make_nccl_group(int device) {
  const int devices = cuda_device_count();
  LB_CHECK(devices > 0, "the NCCL group needs a CUDA device; this process sees none");
  ProcessGroup& boot = world();  // MPI under mpirun, else the single-process group
  int rank = boot.rank(), size = boot.size(), local = env_local_rank(boot.rank());
  const RankInfo env = boot.size() == 1 ? rank_info_from_env() : RankInfo{};
  if (env.from_env) {
    rank = env.rank;
    size = env.size;
    local = env.local_rank;
  }
  if (device < 0) device = local % devices;
  LB_CHECK(device < devices, "NCCL group: cuda:", device, " asked for, ", devices, " device(s) found");
  ncclUniqueId id{};
  std::string hex;
  if (rank == 0) {
    const ncclResult_t r = nccl_lib().ncclGetUniqueId(&id);
    LB_CHECK(r == ncclSuccess, "rank 0: ncclGetUniqueId failed: ", nccl_lib().ncclGetErrorString(r));
    hex = hex_encode(&id, sizeof(id));
  }
  const char* file = std::getenv("LEANBACK_NCCL_ID_FILE");
  if (boot.size() > 1) {
    boot.broadcast(hex, 0, "the NCCL unique id");
  } else if (size > 1) {
    LB_CHECK(file && *file, "rank ", rank, " of ", size, " (RANK/WORLD_SIZE set): the ranks meet through a file; set "
             "LEANBACK_NCCL_ID_FILE to a path every rank can read and that does not exist yet (or launch with mpirun)");
    hex = exchange_through_file(file, rank, hex, dist_timeout_s());
  }
  const std::vector<uint8_t> bytes = hex_decode(hex, sizeof(id), "the NCCL unique id");
  std::memcpy(&id, bytes.data(), sizeof(id));
  auto g = std::make_unique<NcclGroup>(device, rank, size, id, &boot);
  // Every rank has joined (ncclCommInitRank is collective), so no one reads the file again.
  if (rank == 0 && boot.size() == 1 && size > 1) remove_rendezvous_file(file, hex);
  return g;
}

}  // namespace lb::dist
#endif  // LEANBACK_NCCL
