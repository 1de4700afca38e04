// CUDA eigen-solver kernels, the twins of src/cpu/eigh.cpp (src/backend/eigh.h): cuSOLVER's
// 64-bit syevd (cusolverDnXsyevd). cuSOLVER is column-major: the row-major matrix's upper
// triangle is its lower one, and the eigenvectors it writes in columns are rows of the
// row-major buffer, so the result is transposed once to put them in the columns.
#include <cusolverDn.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "lb/core/shared_library.h"
#include "lb/core/views.h"
#include "src/backend/copy.h"
#include "src/backend/eigh.h"

namespace lb::backend {
namespace {

#define LB_CUSOLVER_CHECK(call)                                                                          \
  do {                                                                                                   \
    const cusolverStatus_t st_ = (call);                                                                 \
    if (st_ != CUSOLVER_STATUS_SUCCESS)                                                                  \
      LB_FAIL("cuSOLVER call ", #call, " failed at ", __FILE__, ":", __LINE__, ": status ", static_cast<int>(st_)); \
  } while (0)

// cuSOLVER, loaded on the first eigendecomposition (lb/core/shared_library.h says why).
#define LB_CUSOLVER_FUNCTIONS(X)                                                                  \
  X(cusolverDnCreate) X(cusolverDnSetStream) X(cusolverDnCreateParams) X(cusolverDnDestroyParams) \
  X(cusolverDnXsyevd_bufferSize) X(cusolverDnXsyevd)
struct CusolverApi {
  LB_CUSOLVER_FUNCTIONS(LB_API_MEMBER)
};
const CusolverApi& cusolver() {
  static const CusolverApi table = [] {
    const SharedLibrary lib = SharedLibrary::open({"libcusolver.so." + std::to_string(CUSOLVER_VER_MAJOR)},
                                                  LEANBACK_CUDA_LIBDIR, "an eigendecomposition on a CUDA device");
    CusolverApi api;
    LB_CUSOLVER_FUNCTIONS(LB_API_LOAD)
    return api;
  }();
  return table;
}

// One handle per device, bound to that device's stream (as cuBLAS's in cuda/cublas.cpp).
cusolverDnHandle_t handle_for(int device) {
  static std::mutex m;
  static auto* handles = new std::map<int, cusolverDnHandle_t>;  // never destroyed
  const cudaStream_t s = cuda::stream(device);  // also sets the current device
  std::lock_guard<std::mutex> lock(m);
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  cusolverDnHandle_t h = nullptr;
  LB_CUSOLVER_CHECK(cusolver().cusolverDnCreate(&h));
  LB_CUSOLVER_CHECK(cusolver().cusolverDnSetStream(h, s));
  handles->emplace(device, h);
  return h;
}

// The smallest row-major position i·n + j (j ≥ i) holding a non-finite value.
template <typename T>
__global__ void first_nonfinite_kernel(const T* a, int64_t n, unsigned long long* first) {
  LB_CUDA_FOR_EACH(e, n * n) {
    const int64_t i = e / n, j = e % n;
    if (j >= i && !isfinite(a[e])) atomicMin(first, static_cast<unsigned long long>(e));
  }
}

bool first_nonfinite_upper(const Tensor& a, int64_t* i, int64_t* j) {
  const int64_t n = a.size(0);
  const cudaStream_t s = cuda::stream(a.device().index);
  Tensor first = Tensor::empty({1}, DType::I64, a.device(), MemTag::Workspace);
  LB_CUDA_CHECK(cudaMemsetAsync(first.raw_data(), 0xff, sizeof(unsigned long long), s));
  detail::dispatch_float(a.dtype(), "eigh on CUDA", [&](auto tag) {
    using T = decltype(tag);
    first_nonfinite_kernel<T><<<cuda::blocks_for(n * n), cuda::kThreads, 0, s>>>(
        a.data<T>(), n, static_cast<unsigned long long*>(first.raw_data()));
  });
  LB_CUDA_CHECK_LAUNCH("first_nonfinite_kernel");
  unsigned long long pos = 0;
  LB_CUDA_CHECK(cudaMemcpyAsync(&pos, first.raw_data(), sizeof(pos), cudaMemcpyDeviceToHost, s));
  LB_CUDA_CHECK(cudaStreamSynchronize(s));
  if (pos == ~0ull) return false;
  *i = static_cast<int64_t>(pos) / n;
  *j = static_cast<int64_t>(pos) % n;
  return true;
}

int64_t syevd(Tensor& v, Tensor& w) {
  const int64_t n = v.size(0);
  const int dev = v.device().index;
  const cudaStream_t s = cuda::stream(dev);
  cusolverDnHandle_t h = handle_for(dev);
  const cudaDataType t = v.dtype() == DType::F64 ? CUDA_R_64F : CUDA_R_32F;
  cusolverDnParams_t params = nullptr;
  LB_CUSOLVER_CHECK(cusolver().cusolverDnCreateParams(&params));
  size_t device_bytes = 0, host_bytes = 0;
  LB_CUSOLVER_CHECK(cusolver().cusolverDnXsyevd_bufferSize(h, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, t,
                                                v.raw_data(), n, t, w.raw_data(), t, &device_bytes, &host_bytes));
  Tensor work = Tensor::empty({static_cast<int64_t>(device_bytes) + 1}, DType::U8, v.device(), MemTag::Workspace);
  std::vector<char> host_work(host_bytes + 1);
  Tensor info = Tensor::empty({1}, DType::I32, v.device(), MemTag::Workspace);
  LB_CUSOLVER_CHECK(cusolver().cusolverDnXsyevd(h, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, t, v.raw_data(),
                                     n, t, w.raw_data(), t, work.raw_data(), device_bytes, host_work.data(),
                                     host_bytes, static_cast<int*>(info.raw_data())));
  int host_info = 0;
  LB_CUDA_CHECK(cudaMemcpyAsync(&host_info, info.raw_data(), sizeof(int), cudaMemcpyDeviceToHost, s));
  LB_CUDA_CHECK(cudaStreamSynchronize(s));  // also keeps host_work alive until the solver is done
  LB_CUSOLVER_CHECK(cusolver().cusolverDnDestroyParams(params));
  if (host_info == 0) {
    const Tensor columns = backend::contiguous(views::transpose(v, 0, 1));  // eigenvector k: row k -> column k
    v.copy_(columns);
  }
  return host_info;
}

}  // namespace

const EighKernels kCudaEigh{first_nonfinite_upper, syevd};

}  // namespace lb::backend
