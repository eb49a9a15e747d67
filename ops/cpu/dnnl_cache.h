// What the oneDNN paths (ops/cpu/conv.cpp, matmul.cpp) share: the CPU engine, one stream per
// thread, a cap on the OpenMP team, and the keys of their per-thread primitive caches: plain
// old data made of 64-bit words, fully zero-initialised, so compared and hashed as bytes.
#pragma once
#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <oneapi/dnnl/dnnl.hpp>

namespace graft::cpu {

inline dnnl::engine& dnnl_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
inline dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream s(dnnl_engine());
  return s;
}

// Caps this thread's OpenMP team for a scope: oneDNN reads it when it creates a primitive and
// when it runs one (only touches OpenMP when it lowers the count).
struct OmpThreadLimit {
  int saved;
  explicit OmpThreadLimit(int n) : saved(omp_get_max_threads()) {
    if (n < saved) omp_set_num_threads(n);
  }
  ~OmpThreadLimit() {
    if (omp_get_max_threads() != saved) omp_set_num_threads(saved);
  }
};

template <class Key> bool pod_equal(const Key& a, const Key& b) {
  return std::memcmp(&a, &b, sizeof(Key)) == 0;
}

// FNV-1a over the key's words, with the high bits folded in.
template <class Key> struct PodHash {
  static_assert(sizeof(Key) % 8 == 0, "a cache key is made of 64-bit words");
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(Key) / 8; ++i) {
      uint64_t w;
      std::memcpy(&w, reinterpret_cast<const unsigned char*>(&k) + 8 * i, 8);
      h = (h ^ w) * 1099511628211ull;
    }
    return size_t(h ^ (h >> 29));
  }
};

}  // namespace graft::cpu
