// LB_HD marks the formulas both backends run (__host__ __device__ under nvcc, nothing in
// plain C++), so the CPU tests exercise the arithmetic the GPU kernels use.
#pragma once
#if defined(__CUDACC__)
#define LB_HD __host__ __device__
#else
#define LB_HD
#endif
