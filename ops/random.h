// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011). Element i of a draw
// depends only on (seed, offset + i), so results do not depend on threads or work-groups, and
// an OpenCL kernel can reproduce the CPU stream exactly.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>

#include "ops/context.h"

namespace graft {

inline std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1);
    c3 = uint32_t(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// Uniform in [0, 1) with 53 random bits for element `i` of stream (seed, offset).
inline double philox_uniform(uint64_t seed, uint64_t i) {
  auto r = philox4x32(i, seed);
  uint64_t bits = (uint64_t(r[0]) << 21) ^ uint64_t(r[1]);
  return double(bits & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Standard normal via Box-Muller for element `i` of stream (seed, offset).
inline double philox_normal(uint64_t seed, uint64_t i) {
  auto r = philox4x32(i, seed);
  double u1 = (double(r[0]) + 1.0) * (1.0 / 4294967297.0);  // (0, 1]
  double u2 = double(r[1]) * (1.0 / 4294967296.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// A seeded stream: each draw of n numbers consumes offsets [offset, offset + n).
struct Generator {
  uint64_t seed = 0x5eed;
  uint64_t offset = 0;
  explicit Generator(uint64_t s = 0x5eed) : seed(s) {}
  uint64_t advance(uint64_t n) {
    uint64_t o = offset;
    offset += n;
    ops_context().last_generator = this;
    return o;
  }
  // The generator that last advanced on this thread: graft::compile ties a traced random kernel
  // to it, so that each replay draws a fresh offset.
  static Generator* last_advanced() { return ops_context().last_generator; }
};

// The process-wide default generator (seeded by graft::manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace graft
