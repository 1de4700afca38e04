// GEMMs on AMX tiles (contract in amx_gemm.h).
//
// The tile program: eight tiles of 16 rows × 64 bytes (palette 1, every tile full size).
// Tiles 0-3 hold a 32 × 32 block of C (f32 or int32), tiles 4-5 the two 16-row halves of
// a 32-row group of op(A), tiles 6-7 the two 16-column halves of a 32-column group of op(B);
// per contraction chunk (32 values of k in bf16, 64 in int8) four loads feed four tile
// products (TDPBF16PS / TDPBSSD), each 16 × 16 × chunk. The block then goes through a
// 32 × 32 scratch to the epilogue, which applies alpha, beta or the dequantising scales and
// writes only the rows and columns that exist.
// Packing (plain C++, both machines): a group's tiles are contiguous, chunk after chunk,
// half after half, so every load reads 1 KiB with a 64-byte stride:
//  - A tile row r = the chunk's k values of one row of op(A) (bf16 pairs / int8 quads in k
//    order: the "row-major A" operand the instructions take);
//  - B tile row d = the dword group d of k (2 bf16 / 4 int8 values of k) for each of the 16
//    columns (the instructions' pair- / quad-interleaved B), zero past K, M and N.
// Blocking: bf16 (single-threaded per call) packs B per (k block ≤ 1024, 256 columns) and A
// per 64 rows, C accumulating across k blocks through beta = 1 as the AVX-512 kernel does;
// int8 packs B per k block ≤ 16384 once for all columns and splits 32-row groups over the
// OpenMP threads, with int32 partial sums across k blocks.
// Not measured: no machine these sessions ran on exposed AMX, so the tile instructions have
// only run in the emulator; the blocking is a first guess to tune on such a machine.
#include "src/cpu/amx_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "lb/core/dtype.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/gemm_blocking.h"
#include "src/cpu/isa_target.h"

#if defined(__x86_64__)
#define LB_AMX_HW 1
#include <immintrin.h>
#endif

namespace lb::cpu {

bool amx_bf16_available() { return isa_enabled(Isa::Amx) && cpu_features().amx_bf16; }
bool amx_int8_available() { return isa_enabled(Isa::Amx) && cpu_features().amx_int8; }

namespace {

constexpr int kTileRows = 16;
constexpr int kRowBytes = 64;
constexpr int kTileBytes = kTileRows * kRowBytes;
constexpr int kGroup = 32;  // rows of an A group, columns of a B group, side of a C block

enum class Kind { Bf16, Int8 };

template <Kind K>
struct KindTraits;
template <>
struct KindTraits<Kind::Bf16> {
  using Elem = uint16_t;  // bf16 bits
  using Acc = float;
  static constexpr int kPerDword = 2;
};
template <>
struct KindTraits<Kind::Int8> {
  using Elem = int8_t;
  using Acc = int32_t;
  static constexpr int kPerDword = 4;
};
template <Kind K>
constexpr int kChunk = kRowBytes / static_cast<int>(sizeof(typename KindTraits<K>::Elem));  // k per tile row
template <Kind K>
constexpr int kTileElems = kTileBytes / static_cast<int>(sizeof(typename KindTraits<K>::Elem));

inline uint16_t to_elem(float x) { return f32_to_bf16(x); }
inline uint16_t to_elem(uint16_t x) { return x; }
inline int8_t to_elem(int8_t x) { return x; }

// Rows [0, rows) of op(X) from row i0, k in [k0, k0 + kc): op(X)(i, kk) = X[i·ld + kk], or
// X[kk·ld + i] when trans. Packed into 32-row groups of nch chunks (see the file comment).
template <Kind K, typename S>
void pack_a(const S* x, int64_t ld, bool trans, int64_t i0, int64_t rows, int64_t k0, int64_t kc, int64_t nch,
            typename KindTraits<K>::Elem* dst) {
  using E = typename KindTraits<K>::Elem;
  constexpr int kc_tile = kChunk<K>;
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < groups; ++g)
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < kTileRows; ++r) {
        const int64_t row = g * kGroup + h * kTileRows + r;
        for (int64_t c = 0; c < nch; ++c) {
          E* d = dst + ((g * nch + c) * 2 + h) * kTileElems<K> + r * kc_tile;
          const int64_t kb = c * kc_tile;
          if (row >= rows) {
            std::memset(d, 0, kRowBytes);
            continue;
          }
          const int64_t n = std::clamp<int64_t>(kc - kb, 0, kc_tile);
          if (!trans) {
            const S* s = x + (i0 + row) * ld + k0 + kb;
            for (int64_t e = 0; e < n; ++e) d[e] = to_elem(s[e]);
          } else {
            const S* s = x + (k0 + kb) * ld + i0 + row;
            for (int64_t e = 0; e < n; ++e) d[e] = to_elem(s[e * ld]);
          }
          for (int64_t e = n; e < kc_tile; ++e) d[e] = E(0);
        }
      }
}

// Columns [0, cols) of op(X) from column j0, k in [k0, k0 + kc): op(X)(kk, j) = X[kk·ld + j],
// or X[j·ld + kk] when trans. Tile row d, column n holds k = chunk·kChunk + d·P + (0..P-1).
template <Kind K, typename S>
void pack_b(const S* x, int64_t ld, bool trans, int64_t j0, int64_t cols, int64_t k0, int64_t kc, int64_t nch,
            typename KindTraits<K>::Elem* dst) {
  using E = typename KindTraits<K>::Elem;
  constexpr int P = KindTraits<K>::kPerDword;
  const int64_t groups = (cols + kGroup - 1) / kGroup;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < nch; ++c)
      for (int h = 0; h < 2; ++h) {
        E* tile = dst + ((g * nch + c) * 2 + h) * kTileElems<K>;
        for (int d = 0; d < kTileRows; ++d)
          for (int n = 0; n < 16; ++n) {
            const int64_t col = g * kGroup + h * 16 + n;
            for (int q = 0; q < P; ++q) {
              const int64_t kk = c * kChunk<K> + d * P + q;
              E v = E(0);
              if (col < cols && kk < kc)
                v = to_elem(trans ? x[(j0 + col) * ld + k0 + kk] : x[(k0 + kk) * ld + j0 + col]);
              tile[d * (16 * P) + n * P + q] = v;
            }
          }
      }
}

// The eight tiles and the four instructions, in scalar C++ (the Intel SDM's pseudo-code for
// TDPBF16PS and TDPBSSD: for each row m, each dword k of A's row, each column n; bf16
// inputs with a zero exponent read as zero, as the hardware's DAZ).
template <Kind K>
struct EmulatedTiles {
  alignas(64) unsigned char t[8][kTileBytes];
  template <int T>
  void zero() { std::memset(t[T], 0, kTileBytes); }
  template <int T>
  void load(const void* p) { std::memcpy(t[T], p, kTileBytes); }
  template <int T>
  void store(void* p, int64_t stride) {
    for (int r = 0; r < kTileRows; ++r)
      std::memcpy(static_cast<unsigned char*>(p) + r * stride, t[T] + r * kRowBytes, kRowBytes);
  }
  template <int C, int A, int B>
  void dp() {
    for (int m = 0; m < kTileRows; ++m) {
      if constexpr (K == Kind::Bf16) {
        float crow[16];
        uint16_t arow[32];
        std::memcpy(crow, t[C] + m * kRowBytes, kRowBytes);
        std::memcpy(arow, t[A] + m * kRowBytes, kRowBytes);
        for (int k = 0; k < 16; ++k) {
          uint16_t brow[32];
          std::memcpy(brow, t[B] + k * kRowBytes, kRowBytes);
          for (int n = 0; n < 16; ++n) {
            crow[n] += daz(arow[2 * k]) * daz(brow[2 * n]);
            crow[n] += daz(arow[2 * k + 1]) * daz(brow[2 * n + 1]);
          }
        }
        std::memcpy(t[C] + m * kRowBytes, crow, kRowBytes);
      } else {
        uint32_t crow[16];
        int8_t arow[64];
        std::memcpy(crow, t[C] + m * kRowBytes, kRowBytes);
        std::memcpy(arow, t[A] + m * kRowBytes, kRowBytes);
        for (int k = 0; k < 16; ++k) {
          int8_t brow[64];
          std::memcpy(brow, t[B] + k * kRowBytes, kRowBytes);
          for (int n = 0; n < 16; ++n) {
            int32_t s = 0;
            for (int q = 0; q < 4; ++q) s += int32_t{arow[4 * k + q]} * int32_t{brow[4 * n + q]};
            crow[n] += static_cast<uint32_t>(s);  // wraps modulo 2^32, as the hardware
          }
        }
        std::memcpy(t[C] + m * kRowBytes, crow, kRowBytes);
      }
    }
  }
  static float daz(uint16_t h) { return (h & 0x7f80u) == 0 ? 0.f * bf16_to_f32(h) : bf16_to_f32(h); }
};

}  // namespace

// The tile program is compiled for the AMX target, so its hardware instantiation inlines the
// instructions (its emulated one contains none: a compiler never emits AMX on its own).
#if LB_AMX_HW
LB_ISA_BEGIN_AMX
#endif
namespace {

// C block (32 × 32, row stride kGroup) = Σ over nch chunks of A group · B group.
template <Kind K, class Tiles>
inline void tile_program(Tiles& t, const void* a, const void* b, int64_t nch, void* block) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  t.template zero<0>();
  t.template zero<1>();
  t.template zero<2>();
  t.template zero<3>();
  for (int64_t c = 0; c < nch; ++c) {
    t.template load<4>(pa + (2 * c) * kTileBytes);
    t.template load<5>(pa + (2 * c + 1) * kTileBytes);
    t.template load<6>(pb + (2 * c) * kTileBytes);
    t.template load<7>(pb + (2 * c + 1) * kTileBytes);
    t.template dp<0, 4, 6>();  // rows 0-15, columns 0-15
    t.template dp<1, 4, 7>();  // rows 0-15, columns 16-31
    t.template dp<2, 5, 6>();  // rows 16-31, columns 0-15
    t.template dp<3, 5, 7>();  // rows 16-31, columns 16-31
  }
  constexpr int64_t stride = kGroup * 4;  // bytes per row of the block
  auto* pc = static_cast<unsigned char*>(block);
  t.template store<0>(pc, stride);
  t.template store<1>(pc + 64, stride);
  t.template store<2>(pc + 16 * stride, stride);
  t.template store<3>(pc + 16 * stride + 64, stride);
}

}  // namespace

#if LB_AMX_HW
namespace {

// The real tiles: the instructions take tile numbers as immediates, hence the constexpr chains.
template <Kind K>
struct HardwareTiles {
  template <int T>
  void zero() {
    static_assert(T >= 0 && T < 4);
    if constexpr (T == 0) _tile_zero(0);
    else if constexpr (T == 1) _tile_zero(1);
    else if constexpr (T == 2) _tile_zero(2);
    else _tile_zero(3);
  }
  template <int T>
  void load(const void* p) {
    static_assert(T >= 4 && T < 8);
    __asm__ volatile("" ::: "memory");  // GCC's tileloadd asm names no memory input
    if constexpr (T == 4) _tile_loadd(4, p, kRowBytes);
    else if constexpr (T == 5) _tile_loadd(5, p, kRowBytes);
    else if constexpr (T == 6) _tile_loadd(6, p, kRowBytes);
    else _tile_loadd(7, p, kRowBytes);
  }
  template <int T>
  void store(void* p, int64_t stride) {
    static_assert(T >= 0 && T < 4);
    if constexpr (T == 0) _tile_stored(0, p, stride);
    else if constexpr (T == 1) _tile_stored(1, p, stride);
    else if constexpr (T == 2) _tile_stored(2, p, stride);
    else _tile_stored(3, p, stride);
  }
  template <int C, int A, int B>
  void dp() {
    constexpr int id = C * 100 + A * 10 + B;
    static_assert(id == 46 || id == 147 || id == 256 || id == 357, "the tile program's four products");
    if constexpr (K == Kind::Bf16) {
      if constexpr (id == 46) _tile_dpbf16ps(0, 4, 6);
      else if constexpr (id == 147) _tile_dpbf16ps(1, 4, 7);
      else if constexpr (id == 256) _tile_dpbf16ps(2, 5, 6);
      else _tile_dpbf16ps(3, 5, 7);
    } else {
      if constexpr (id == 46) _tile_dpbssd(0, 4, 6);
      else if constexpr (id == 147) _tile_dpbssd(1, 4, 7);
      else if constexpr (id == 256) _tile_dpbssd(2, 5, 6);
      else _tile_dpbssd(3, 5, 7);
    }
  }
};

// Palette 1, all eight tiles 16 rows × 64 bytes; per thread (tile state is per thread).
void hw_configure() {
  alignas(64) unsigned char cfg[64] = {};
  cfg[0] = 1;
  for (int i = 0; i < 8; ++i) {
    const uint16_t colsb = kRowBytes;
    std::memcpy(cfg + 16 + 2 * i, &colsb, 2);
    cfg[48 + i] = kTileRows;
  }
  _tile_loadconfig(cfg);
}
void hw_release() { _tile_release(); }

template <Kind K>
void hw_program(const void* a, const void* b, int64_t nch, void* block) {
  HardwareTiles<K> t;
  tile_program<K>(t, a, b, nch, block);
}

}  // namespace
#endif  // LB_AMX_HW
#if LB_AMX_HW
LB_ISA_END
#endif

namespace {

// One program run on the chosen machine.
template <Kind K>
inline void run_program(AmxRun run, EmulatedTiles<K>* emu, const void* a, const void* b, int64_t nch, void* block) {
#if LB_AMX_HW
  if (run == AmxRun::Hardware) {
    hw_program<K>(a, b, nch, block);
    return;
  }
#endif
  (void)run;
  tile_program<K>(*emu, a, b, nch, block);
}

struct TileSession {  // configures the tiles of this thread for the hardware, releases them after
  explicit TileSession(AmxRun r) : run(r) {
#if LB_AMX_HW
    if (run == AmxRun::Hardware) hw_configure();
#endif
  }
  ~TileSession() {
#if LB_AMX_HW
    if (run == AmxRun::Hardware) hw_release();
#endif
  }
  TileSession(const TileSession&) = delete;
  TileSession& operator=(const TileSession&) = delete;
  AmxRun run;
};

void require_hardware(AmxRun run, bool available) {
  if (run == AmxRun::Hardware && !available) std::abort();  // callers check amx_*_available()
}

thread_local gemm_detail::PackBuffer<uint16_t> t_bf16_apack, t_bf16_bpack;

}  // namespace

template <typename SA, typename SB>
void amx_sgemm_bf16(AmxRun run, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const SA* a, int64_t lda, const SB* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  require_hardware(run, amx_bf16_available());
  if (gemm_detail::gemm_without_product(m, n, k, alpha, beta, c, ldc)) return;
  constexpr Kind K = Kind::Bf16;
  constexpr int64_t kKC = 1024, kNC = 256, kMC = 64;
  const int64_t kc_max = gemm_detail::balanced_block(k, kKC, kChunk<K>);
  const int64_t nc_max = gemm_detail::balanced_block(n, kNC, kGroup);
  const int64_t mc_max = gemm_detail::balanced_block(m, kMC, kGroup);
  const int64_t nch_max = (kc_max + kChunk<K> - 1) / kChunk<K>;
  const auto group_elems = [&](int64_t nch) { return nch * 2 * kTileElems<K>; };
  uint16_t* apack = t_bf16_apack.get(static_cast<size_t>((mc_max + kGroup - 1) / kGroup * group_elems(nch_max)));
  uint16_t* bpack = t_bf16_bpack.get(static_cast<size_t>((nc_max + kGroup - 1) / kGroup * group_elems(nch_max)));
  std::vector<EmulatedTiles<K>> emu(run == AmxRun::Emulated ? 1 : 0);
  alignas(64) float block[kGroup * kGroup];
  TileSession session(run);
  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc), nch = (kc + kChunk<K> - 1) / kChunk<K>;
      const bool first = pc == 0;
      const float beta_k = first ? beta : 1.f;
      const bool beta_zero = first && beta == 0.f;
      pack_b<K>(b, ldb, trans_b, jc, nc, pc, kc, nch, bpack);
      for (int64_t ic = 0; ic < m; ic += mc_max) {
        const int64_t mc = std::min(mc_max, m - ic);
        pack_a<K>(a, lda, trans_a, ic, mc, pc, kc, nch, apack);
        for (int64_t gi = 0; gi * kGroup < mc; ++gi)
          for (int64_t gj = 0; gj * kGroup < nc; ++gj) {
            run_program<K>(run, emu.empty() ? nullptr : emu.data(), apack + gi * group_elems(nch),
                           bpack + gj * group_elems(nch), nch, block);
            const int64_t mr = std::min<int64_t>(kGroup, mc - gi * kGroup);
            const int64_t nr = std::min<int64_t>(kGroup, nc - gj * kGroup);
            float* cb = c + (ic + gi * kGroup) * ldc + jc + gj * kGroup;
            for (int64_t r = 0; r < mr; ++r)
              for (int64_t j = 0; j < nr; ++j) {
                const float y = block[r * kGroup + j] * alpha;
                float& out = cb[r * ldc + j];
                out = beta_zero ? y : std::fma(out, beta_k, y);  // as the AVX-512 kernel's epilogue
              }
          }
      }
    }
  }
}

template void amx_sgemm_bf16<float, float>(AmxRun, bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                           int64_t, const float*, int64_t, float, float*, int64_t);
template void amx_sgemm_bf16<uint16_t, float>(AmxRun, bool, bool, int64_t, int64_t, int64_t, float,
                                              const uint16_t*, int64_t, const float*, int64_t, float, float*,
                                              int64_t);
template void amx_sgemm_bf16<float, uint16_t>(AmxRun, bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                              int64_t, const uint16_t*, int64_t, float, float*, int64_t);
template void amx_sgemm_bf16<uint16_t, uint16_t>(AmxRun, bool, bool, int64_t, int64_t, int64_t, float,
                                                 const uint16_t*, int64_t, const uint16_t*, int64_t, float, float*,
                                                 int64_t);

namespace {

// The int8 epilogue of one block row-range: int32 sums (plus the partials of earlier k
// blocks) to C or through the scales to f32, in the VNNI kernel's order of operations.
void int8_epilogue(const int32_t* block, int64_t row0, int64_t col0, int64_t mr, int64_t nr,
                   const AmxInt8Output& o) {
  for (int64_t r = 0; r < mr; ++r) {
    const int64_t row = row0 + r;
    if (o.to_f32) {
      const float s = (o.row_scale ? o.row_scale[row] : 1.f) * o.alpha;
      float* out = o.out + row * o.ld + col0;
      for (int64_t j = 0; j < nr; ++j) {
        float y = static_cast<float>(block[r * kGroup + j]) * s;
        if (o.col_scale) y *= o.col_scale[col0 + j];
        out[j] = o.accumulate ? y + out[j] : y;
      }
    } else {
      int32_t* out = o.c + row * o.ld + col0;
      for (int64_t j = 0; j < nr; ++j)
        out[j] = o.accumulate ? static_cast<int32_t>(static_cast<uint32_t>(out[j]) +
                                                     static_cast<uint32_t>(block[r * kGroup + j]))
                              : block[r * kGroup + j];
    }
  }
}

}  // namespace

void amx_int8_gemm(AmxRun run, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                   int64_t lda, const int8_t* B, int64_t ldb, const AmxInt8Output& out) {
  require_hardware(run, amx_int8_available());
  if (M <= 0 || N <= 0) return;
  constexpr Kind KK = Kind::Int8;
  constexpr int64_t kKC = 16384;
  const int64_t kblocks = std::max<int64_t>(1, (K + kKC - 1) / kKC);
  const int64_t kc_max = std::min(K, kKC), nch_max = (kc_max + kChunk<KK> - 1) / kChunk<KK>;
  const int64_t group_bytes = nch_max * 2 * kTileBytes;
  const int64_t ngroups = (N + kGroup - 1) / kGroup, mgroups = (M + kGroup - 1) / kGroup;
  std::vector<int8_t> bpack(static_cast<size_t>(ngroups * group_bytes));
  std::vector<int32_t> part;  // int32 sums of the k blocks before the last, (M, N)
  if (kblocks > 1) part.assign(static_cast<size_t>(M * N), 0);
  const int threads = omp_get_max_threads();
  std::vector<int8_t> apack(static_cast<size_t>(threads * group_bytes));
  const bool parallel = M * N * std::max<int64_t>(K, 1) > (int64_t{1} << 25);
  for (int64_t kb = 0; kb < kblocks; ++kb) {
    const int64_t k0 = kb * kKC, kc = std::max<int64_t>(0, std::min(kKC, K - k0));
    const int64_t nch = (kc + kChunk<KK> - 1) / kChunk<KK>;
    const bool last = kb + 1 == kblocks;
#pragma omp parallel if (parallel)
    {
#pragma omp for schedule(static)
      for (int64_t g = 0; g < ngroups; ++g) {
        const int64_t cols = std::min<int64_t>(kGroup, N - g * kGroup);
        pack_b<KK>(B, ldb, trans_b, g * kGroup, cols, k0, kc, nch, bpack.data() + g * nch * 2 * kTileBytes);
      }
      TileSession session(run);
      std::vector<EmulatedTiles<KK>> emu(run == AmxRun::Emulated ? 1 : 0);
      alignas(64) int32_t block[kGroup * kGroup];
      int8_t* ap = apack.data() + omp_get_thread_num() * group_bytes;
#pragma omp for schedule(dynamic, 1)
      for (int64_t gi = 0; gi < mgroups; ++gi) {
        const int64_t row0 = gi * kGroup, mr = std::min<int64_t>(kGroup, M - row0);
        pack_a<KK>(A, lda, trans_a, row0, mr, k0, kc, nch, ap);
        for (int64_t gj = 0; gj < ngroups; ++gj) {
          const int64_t col0 = gj * kGroup, nr = std::min<int64_t>(kGroup, N - col0);
          run_program<KK>(run, emu.empty() ? nullptr : emu.data(), ap, bpack.data() + gj * nch * 2 * kTileBytes,
                          nch, block);
          if (kblocks > 1)
            for (int64_t r = 0; r < mr; ++r)
              for (int64_t j = 0; j < nr; ++j) {
                int32_t& p = part[static_cast<size_t>((row0 + r) * N + col0 + j)];
                const uint32_t s = static_cast<uint32_t>(p) + static_cast<uint32_t>(block[r * kGroup + j]);
                if (last)
                  block[r * kGroup + j] = static_cast<int32_t>(s);
                else
                  p = static_cast<int32_t>(s);
              }
          if (last) int8_epilogue(block, row0, col0, mr, nr, out);
        }
      }
    }
  }
}

}  // namespace lb::cpu
