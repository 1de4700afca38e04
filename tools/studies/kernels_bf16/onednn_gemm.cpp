// oneDNN's matmul on one GEMM shape, timed the way `leanback bench gemm` times ours: the
// reference tools/studies/kernels_bf16/onednn_gemm.sh compares our f32, bf16 and int8 kernels against.
//   onednn_gemm f32|bf16|int8 M N K [--ta] [--tb] [--iters N]
// C = op(A) op(B), row-major, op = transpose when --ta / --tb (A stored (K, M), B (N, K)).
// bf16: bf16 A and B (converted before timing), f32 C; int8: s8 A and B, s32 C. Prints one
// JSON line: GFLOP/s (GOP/s for int8; a multiply-add = 2) and the implementation oneDNN chose.
// Single-threaded when run with OMP_NUM_THREADS=1, as the script does.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using dnnl::memory;

int usage() {
  std::fprintf(stderr, "usage: onednn_gemm f32|bf16|int8 M N K [--ta] [--tb] [--iters N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return usage();
  const std::string precision = argv[1];
  if (precision != "f32" && precision != "bf16" && precision != "int8") return usage();
  const memory::dim M = std::atoll(argv[2]), N = std::atoll(argv[3]), K = std::atoll(argv[4]);
  if (M < 1 || N < 1 || K < 1) return usage();
  bool ta = false, tb = false;
  int iters = 5;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ta") ta = true;
    else if (a == "--tb") tb = true;
    else if (a == "--iters" && i + 1 < argc) iters = std::max(1, std::atoi(argv[++i]));
    else return usage();
  }
  const memory::data_type in = precision == "f32"    ? memory::data_type::f32
                               : precision == "bf16" ? memory::data_type::bf16
                                                     : memory::data_type::s8;
  const memory::data_type out = precision == "int8" ? memory::data_type::s32 : memory::data_type::f32;

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  // op(A) is (M, K): stored transposed, its strides swap; likewise B.
  const memory::dims a_dims{M, K}, b_dims{K, N};
  const memory::dims a_strides = ta ? memory::dims{1, M} : memory::dims{K, 1};
  const memory::dims b_strides = tb ? memory::dims{1, K} : memory::dims{N, 1};
  const memory::desc a_md(a_dims, in, a_strides), b_md(b_dims, in, b_strides);
  const memory::desc c_md({M, N}, out, memory::dims{N, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);  // oneDNN 2.x
  const dnnl::matmul mm(pd);

  // Uniform values in [-1, 1] (int8: levels ±127), converted to the input type by a reorder.
  std::mt19937 g(1);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  auto filled = [&](const memory::desc& md, const memory::dims& dims, const memory::dims& strides) {
    std::vector<float> v(static_cast<size_t>(dims[0] * dims[1]));
    for (float& x : v) x = precision == "int8" ? std::round(d(g) * 127.f) : d(g);
    const memory::desc f32_md(dims, memory::data_type::f32, strides);
    memory src(f32_md, eng, v.data()), dst(md, eng);
    dnnl::reorder(src, dst).execute(strm, src, dst);
    strm.wait();
    return dst;
  };
  memory a = filled(a_md, a_dims, a_strides), b = filled(b_md, b_dims, b_strides), c(c_md, eng);

  const double flops = 2.0 * static_cast<double>(M) * N * K;
  const int reps = std::max(1, static_cast<int>(2e9 * 0.02 / std::max(1.0, flops)));
  auto run = [&] {
    mm.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  };
  run();  // warm-up
  std::vector<double> rates;
  for (int it = 0; it < iters; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(flops * reps / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  const dnnl_version_t* v = dnnl_version();
  std::printf("{\"framework\":\"onednn\",\"version\":\"%d.%d.%d\",\"precision\":\"%s\",\"m\":%lld,"
              "\"n\":%lld,\"k\":%lld,\"ta\":%s,\"tb\":%s,\"gflops\":%.2f,\"impl\":\"%s\"}\n",
              v->major, v->minor, v->patch, precision.c_str(), static_cast<long long>(M),
              static_cast<long long>(N), static_cast<long long>(K), ta ? "true" : "false",
              tb ? "true" : "false", rates[rates.size() / 2], pd.impl_info_str());
  return 0;
}
