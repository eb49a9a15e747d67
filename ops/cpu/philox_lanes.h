// Philox-4x32-10 (ops/random.h) on up to N consecutive counters at once, for the CPU kernels
// that draw in bulk (random fills, attention dropout).
#pragma once
#include <cstdint>

#include "ops/cpu/cpu_kernels.h"  // GRAFT_CPU_NAMESPACE: this ISA copy's namespace

namespace GRAFT_CPU_NAMESPACE {

// w0[l], w1[l] = the first two output words of philox4x32(counter0 + l, key) for l < n <= N:
// the arithmetic of ops/random.h laid out structure-of-arrays over the counters, so that its
// 32x32 -> 64-bit multiplies become vector instructions. Integer maths: the words are the same.
template <int64_t N>
inline void philox_lanes(uint64_t counter0, uint64_t key, int64_t n, uint32_t* w0, uint32_t* w1) {
  alignas(64) uint32_t c0[N], c1[N], c2[N], c3[N];
#pragma omp simd
  for (int64_t l = 0; l < n; ++l) {
    const uint64_t c = counter0 + uint64_t(l);
    c0[l] = uint32_t(c);
    c1[l] = uint32_t(c >> 32);
    c2[l] = 0;
    c3[l] = 0;
  }
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
#pragma omp simd
    for (int64_t l = 0; l < n; ++l) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0[l], p1 = uint64_t(0xCD9E8D57u) * c2[l];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0, n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
#pragma omp simd
  for (int64_t l = 0; l < n; ++l) {
    w0[l] = c0[l];
    w1[l] = c1[l];
  }
}

}  // namespace graft::cpu
