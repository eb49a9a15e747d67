// Timing helpers of the kernel benchmarks (bench_*.cpp): wall time of a call, calls per second,
// the median of a set of timings, and the one-line JSON result of a bandwidth benchmark.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace graft::bench {

// Wall seconds that f() takes.
inline double seconds_of(auto&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Calls of f() per second: one warm-up call, then batches of 1, 2, 4, ... calls until `min_s`
// seconds have passed.
inline double per_second(auto&& f, double min_s = 0.5) {
  f();
  int64_t n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double el = 0;
  for (int64_t batch = 1; el < min_s; batch *= 2) {
    for (int64_t i = 0; i < batch; ++i) f();
    n += batch;
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return double(n) / el;
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
