// Run-time CPU feature detection and the LEANBACK_ISA cap (contract in cpu_features.h).
#include "src/cpu/cpu_features.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "lb/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LB_X86 1
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace lb::cpu {

namespace {

#if LB_X86
void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

// The OS's XSAVE feature mask (which register states it saves across context switches).
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned v, int b) { return (v >> b) & 1u; }
#endif

CpuFeatures detect() {
  CpuFeatures f;
#if LB_X86
  unsigned r[4];
  cpuid(0, 0, r);
  const unsigned max_leaf = r[0];
  cpuid(0x80000000u, 0, r);
  if (r[0] >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      cpuid(0x80000002u + i, 0, r);
      std::memcpy(brand + 16 * i, r, 16);
    }
    f.brand = brand;
    while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
    while (!f.brand.empty() && f.brand.front() == ' ') f.brand.erase(0, 1);
  }
  if (max_leaf < 1) return f;
  cpuid(1, 0, r);
  const bool osxsave = bit(r[2], 27), avx = bit(r[2], 28), fma = bit(r[2], 12);
  if (!osxsave || !avx) return f;
  const uint64_t x = xcr0();
  const bool ymm_state = (x & 0x6) == 0x6;                 // SSE + AVX state
  const bool zmm_state = ymm_state && (x & 0xE0) == 0xE0;  // opmask + both ZMM halves
  const bool tile_state = (x & 0x60000) == 0x60000;        // XTILECFG + XTILEDATA
  if (!ymm_state || max_leaf < 7) return f;
  cpuid(7, 0, r);
  const unsigned ebx = r[1], ecx = r[2], edx = r[3];
  const unsigned subleaves = r[0];
  f.fma = fma;
  f.avx2 = bit(ebx, 5) && fma;
  if (zmm_state) {
    f.avx512f = bit(ebx, 16);
    f.avx512dq = bit(ebx, 17);
    f.avx512bw = bit(ebx, 30);
    f.avx512vl = bit(ebx, 31);
    f.avx512vnni = bit(ecx, 11);
    if (subleaves >= 1) {
      cpuid(7, 1, r);
      f.avx512bf16 = bit(r[0], 5);
    }
  }
  if (tile_state) {
    f.amx_bf16 = bit(edx, 22);
    f.amx_tile = bit(edx, 24);
    f.amx_int8 = bit(edx, 25);
  }
#if defined(__linux__)
  // Linux hands out AMX tile state only to processes that ask (since 5.16).
  if (f.amx_tile) {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    f.amx_permitted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }
#endif
#endif
  return f;
}

struct IsaName {
  Isa isa;
  const char* name;
};
constexpr IsaName kIsaNames[] = {{Isa::Portable, "portable"},     {Isa::Avx2, "avx2"},
                                 {Isa::Avx512, "avx512"},         {Isa::Avx512Vnni, "avx512-vnni"},
                                 {Isa::Avx512Bf16, "avx512-bf16"}, {Isa::Amx, "amx"}};

std::string accepted_names() {
  std::string s;
  for (const auto& n : kIsaNames) {
    if (!s.empty()) s += '|';
    s += n.name;
  }
  return s;
}

// LEANBACK_ISA parsed: ok = false for an unknown value.
Isa parse_env(bool& ok, std::string& value) {
  ok = true;
  const char* v = std::getenv("LEANBACK_ISA");
  if (!v || !*v) return Isa::Amx;
  value = v;
  for (const auto& n : kIsaNames)
    if (value == n.name) return n.isa;
  ok = false;
  return Isa::Portable;
}

std::atomic<int> g_cap{-1};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool cpu_has(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx512 = f.avx2 && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2: return f.avx2;
    case Isa::Avx512: return avx512;
    case Isa::Avx512Vnni: return avx512 && f.avx512vnni;
    case Isa::Avx512Bf16: return avx512 && f.avx512vnni && f.avx512bf16;
    case Isa::Amx: return f.amx_tile && f.amx_permitted && (f.amx_bf16 || f.amx_int8);
  }
  return false;
}

Isa isa_cap() {
  int c = g_cap.load(std::memory_order_acquire);
  if (c < 0) {
    bool ok = true;
    std::string value;
    const Isa cap = parse_env(ok, value);
    int expected = -1;
    if (g_cap.compare_exchange_strong(expected, static_cast<int>(cap)) && !ok)
      std::fprintf(stderr, "leanback: warning: LEANBACK_ISA='%s' is not one of %s; using portable kernels\n",
                   value.c_str(), accepted_names().c_str());
    c = g_cap.load(std::memory_order_acquire);
  }
  return static_cast<Isa>(c);
}

bool isa_enabled(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(isa_cap()) && cpu_has(isa); }

Isa isa_selected() {
  Isa best = Isa::Portable;
  for (const auto& n : kIsaNames)
    if (isa_enabled(n.isa)) best = n.isa;
  return best;
}

const char* isa_name(Isa isa) {
  for (const auto& n : kIsaNames)
    if (n.isa == isa) return n.name;
  return "?";
}

void check_isa_env() {
  bool ok = true;
  std::string value;
  parse_env(ok, value);
  if (!ok) LB_FAIL("LEANBACK_ISA='", value, "' is not one of ", accepted_names());
}

void reset_isa_cap_for_testing() { g_cap.store(-1, std::memory_order_release); }

std::string isa_summary() {
  const CpuFeatures& f = cpu_features();
  std::string has;
  auto add = [&](bool b, const char* n) {
    if (!b) return;
    if (!has.empty()) has += ' ';
    has += n;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vl, "avx512vl");
  add(f.avx512vnni, "avx512-vnni");
  add(f.avx512bf16, "avx512-bf16");
  add(f.amx_tile, "amx-tile");
  add(f.amx_bf16, "amx-bf16");
  add(f.amx_int8, "amx-int8");
  if (f.amx_tile) has += f.amx_permitted ? " (amx permitted)" : " (amx not permitted by the kernel)";
  std::string s = (f.brand.empty() ? std::string("unknown CPU") : f.brand) + ": " + (has.empty() ? "no vector extensions used" : has);
  const char* env = std::getenv("LEANBACK_ISA");
  s += std::string("; kernels up to ") + isa_name(isa_selected());
  if (env && *env) s += std::string(" (LEANBACK_ISA=") + env + ")";
  return s;
}

}  // namespace lb::cpu
