// xsimd for the CPU kernels that reduce across AVX-512 lanes. GCC 12 reports the
// _mm512_undefined_* placeholders inside xsimd's AVX-512 reductions as uninitialised once they
// are inlined into a kernel; they are intentionally undefined lanes, so those two warnings are
// off for xsimd's own code only.
#pragma once
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
