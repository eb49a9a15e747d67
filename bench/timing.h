// Timing helpers of the kernel benchmarks (bench_*.cpp): wall time of a call, the median of a
// set of timings, and the one-line JSON result of a bandwidth benchmark.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace graft::bench {

// Wall seconds that f() takes.
inline double seconds_of(auto&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// {"name": ..., "value": GB/s, "unit": "GB/s", "reference": ..., "ratio": ..., "threads": ...}
inline void emit_gbps(const char* name, double gbps, double ref, int threads) {
  std::printf(
      "{\"name\": \"%s\", \"value\": %.2f, \"unit\": \"GB/s\", \"reference\": %.2f, "
      "\"ratio\": %.3f, \"threads\": %d}\n",
      name, gbps, ref, gbps / ref, threads);
  std::fflush(stdout);
}

}  // namespace graft::bench
