// Compile a region of functions for an instruction set the build's baseline may lack
// (GCC: push_options/target pragmas; clang: an attribute pushed on every function). The
// functions must only run after cpu::isa_enabled (cpu_features.h) says the CPU has it. Keep
// such functions in an anonymous namespace: an inline or template function compiled here
// with wider instructions must never be merged with a baseline copy elsewhere.
//
//   LB_ISA_BEGIN_AVX2 ... LB_ISA_END         AVX2 + FMA (Isa::Avx2)
//   LB_ISA_BEGIN_AVX512 ... LB_ISA_END       AVX-512 F/BW/DQ/VL + AVX2/FMA
//   LB_ISA_BEGIN_AVX512_VNNI ... LB_ISA_END  + VNNI
//   LB_ISA_BEGIN_AVX512_BF16 ... LB_ISA_END  + AVX512-BF16
//   LB_ISA_BEGIN_AMX ... LB_ISA_END          AMX tiles (TILE, BF16, INT8) only
#pragma once

#if defined(__clang__)
#define LB_ISA_PRAGMA(x) _Pragma(#x)
#define LB_ISA_BEGIN(features) \
  LB_ISA_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define LB_ISA_END LB_ISA_PRAGMA(clang attribute pop)
#else
#define LB_ISA_PRAGMA(x) _Pragma(#x)
#define LB_ISA_BEGIN(features) LB_ISA_PRAGMA(GCC push_options) LB_ISA_PRAGMA(GCC target(features))
#define LB_ISA_END LB_ISA_PRAGMA(GCC pop_options)
#endif

// (Whole literals: pragmas do not concatenate adjacent strings.)
#define LB_ISA_BEGIN_AVX2 LB_ISA_BEGIN("avx2,fma")
#define LB_ISA_BEGIN_AVX512 LB_ISA_BEGIN("avx2,fma,f16c,bmi,bmi2,avx512f,avx512bw,avx512dq,avx512vl")
#define LB_ISA_BEGIN_AVX512_VNNI \
  LB_ISA_BEGIN("avx2,fma,f16c,bmi,bmi2,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")
#define LB_ISA_BEGIN_AVX512_BF16 \
  LB_ISA_BEGIN("avx2,fma,f16c,bmi,bmi2,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512bf16")
#define LB_ISA_BEGIN_AMX LB_ISA_BEGIN("amx-tile,amx-bf16,amx-int8")
