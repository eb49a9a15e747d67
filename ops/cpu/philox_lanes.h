// Philox-4x32-10 (ops/random.h) on up to N consecutive counters at once, for the CPU kernels
// that draw in bulk (random fills, dropout masks, attention dropout).
#pragma once
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ops/cpu/cpu_kernels.h"  // GRAFT_CPU_NAMESPACE: this ISA copy's namespace

namespace GRAFT_CPU_NAMESPACE {

namespace philox_detail {
inline constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
inline constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (Weyl) steps

// One vector of 32-bit counter words per ISA: Vec, its lane count, and the few operations the
// rounds need, so that the rounds below are written once.
#if defined(__AVX512F__)
using Vec = __m512i;
inline constexpr int64_t kVecLanes = 16;
inline Vec vxor(Vec a, Vec b) { return _mm512_xor_si512(a, b); }
inline Vec vset1(uint32_t x) { return _mm512_set1_epi32(int(x)); }
inline Vec vmultiplier(uint32_t m) { return _mm512_set1_epi64(m); }  // m in each even lane
inline void vstore(uint32_t* w, Vec v) { _mm512_storeu_si512(w, v); }
// hi, lo = the 64-bit products a[l] * m split in 32-bit halves. vpmuludq multiplies the even
// 32-bit lanes; the odd lanes are shifted down and multiplied likewise.
inline void mul_hi_lo(Vec a, Vec m, Vec& hi, Vec& lo) {
  const Vec even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  lo = _mm512_mask_blend_epi32(__mmask16(0xAAAA), even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(__mmask16(0xAAAA), _mm512_srli_epi64(even, 32), odd);
}
// c0, c1 = the low and high words of counter0 + l for the 16 lanes l.
inline void counters(uint64_t counter0, Vec& c0, Vec& c1) {
  const Vec lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const Vec base = vset1(uint32_t(counter0)), high = vset1(uint32_t(counter0 >> 32));
  c0 = _mm512_add_epi32(base, lane);
  // The high word carries where the low word wrapped past 2^32.
  const __mmask16 wrapped = _mm512_cmplt_epu32_mask(c0, base);
  c1 = _mm512_mask_add_epi32(high, wrapped, high, vset1(1));
}
#elif defined(__AVX2__)
using Vec = __m256i;
inline constexpr int64_t kVecLanes = 8;
inline Vec vxor(Vec a, Vec b) { return _mm256_xor_si256(a, b); }
inline Vec vset1(uint32_t x) { return _mm256_set1_epi32(int(x)); }
inline Vec vmultiplier(uint32_t m) { return _mm256_set1_epi64x(m); }
inline void vstore(uint32_t* w, Vec v) { _mm256_storeu_si256(reinterpret_cast<Vec*>(w), v); }
inline void mul_hi_lo(Vec a, Vec m, Vec& hi, Vec& lo) {
  const Vec even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
inline void counters(uint64_t counter0, Vec& c0, Vec& c1) {
  alignas(32) uint32_t lo[8], hi[8];
  for (int l = 0; l < 8; ++l) {
    const uint64_t c = counter0 + uint64_t(l);
    lo[l] = uint32_t(c);
    hi[l] = uint32_t(c >> 32);
  }
  c0 = _mm256_load_si256(reinterpret_cast<const Vec*>(lo));
  c1 = _mm256_load_si256(reinterpret_cast<const Vec*>(hi));
}
#endif

#if defined(__AVX512F__) || defined(__AVX2__)
// The ten rounds on kVecLanes counters counter0 + [0, kVecLanes).
inline void block(uint64_t counter0, uint64_t key, uint32_t* w0, uint32_t* w1) {
  Vec c0, c1;
  counters(counter0, c0, c1);
  Vec c2 = vset1(0), c3 = vset1(0);
  const Vec m0 = vmultiplier(kM0), m1 = vmultiplier(kM1);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    Vec hi0, lo0, hi1, lo1;
    mul_hi_lo(c0, m0, hi0, lo0);
    mul_hi_lo(c2, m1, hi1, lo1);
    const Vec n0 = vxor(vxor(hi1, c1), vset1(k0)), n2 = vxor(vxor(hi0, c3), vset1(k1));
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  vstore(w0, c0);
  vstore(w1, c1);
}
#endif
}  // namespace philox_detail

// w0[l], w1[l] = the first two output words of philox4x32(counter0 + l, key) for l < n <= N:
// the arithmetic of ops/random.h laid out structure-of-arrays over the counters, so that its
// 32x32 -> 64-bit multiplies become vector instructions (vpmuludq on AVX2 and AVX-512; a plain
// loop elsewhere). Integer maths: the words are the same. w0 and w1 hold N words each; entries
// from n to N may be overwritten.
template <int64_t N>
inline void philox_lanes(uint64_t counter0, uint64_t key, int64_t n, uint32_t* w0, uint32_t* w1) {
  using namespace philox_detail;
#if defined(__AVX512F__) || defined(__AVX2__)
  if constexpr (N % kVecLanes == 0) {
    for (int64_t l = 0; l < n; l += kVecLanes) block(counter0 + uint64_t(l), key, w0 + l, w1 + l);
    return;
  }
#endif
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
      const uint64_t p0 = uint64_t(kM0) * c0[l], p1 = uint64_t(kM1) * c2[l];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0, n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += kW0;
    k1 += kW1;
  }
#pragma omp simd
  for (int64_t l = 0; l < n; ++l) {
    w0[l] = c0[l];
    w1[l] = c1[l];
  }
}

}  // namespace GRAFT_CPU_NAMESPACE
