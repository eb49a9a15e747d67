// Bandwidth of the fast elementwise kernels on 16M float32 elements (contiguous, out of place)
// against memcpy measured in the same run with the same thread count. Prints one JSON object
// per line:
//   {"name": "elementwise_add", "value": GB/s, "unit": "GB/s", "reference": memcpy GB/s,
//    "ratio": value / reference, "threads": n}
// Bytes count reads + writes: add/mul move 3 arrays (2 read, 1 written), gelu and memcpy 2.
// The memcpy reference copies one 16M-float array (split across the threads).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

using namespace graft;

namespace {

constexpr int64_t kN = int64_t(16) << 20;  // elements per array
constexpr int kReps = 11;

// Median wall time of kReps runs of f, after one warm-up run (page faults, thread start-up).
template <class F> double median_seconds(const F& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < kReps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

TensorView view(float* p) {
  TensorView v;
  v.data = p;
  v.dtype = DType::f32;
  v.shape = Shape{kN};
  v.strides = contiguous_strides(v.shape);
  return v;
}

void emit(const char* name, double gbps, double ref, int threads) {
  std::printf(
      "{\"name\": \"%s\", \"value\": %.2f, \"unit\": \"GB/s\", \"reference\": %.2f, "
      "\"ratio\": %.3f, \"threads\": %d}\n",
      name, gbps, ref, gbps / ref, threads);
  std::fflush(stdout);
}

}  // namespace

int main() {
  std::vector<float> a(kN), b(kN), out(kN);
  for (int64_t i = 0; i < kN; ++i) {  // values in gelu's interesting range
    a[i] = float(i % 1000) * 0.006f - 3.0f;
    b[i] = float(i % 777) * 0.004f + 0.5f;
  }
  const TensorView va = view(a.data()), vb = view(b.data()), vo = view(out.data());
  const double gb = double(kN) * sizeof(float) / 1e9;  // one array, in GB

  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const double t_copy = median_seconds([&] {
#pragma omp parallel for schedule(static)
      for (int t = 0; t < threads; ++t) {
        const int64_t lo = kN * t / threads, hi = kN * (t + 1) / threads;
        std::memcpy(out.data() + lo, a.data() + lo, (hi - lo) * sizeof(float));
      }
    });
    const double ref = 2 * gb / t_copy;
    const double t_add = median_seconds([&] { cpu::binary(BinaryOp::add, va, vb, vo); });
    emit("elementwise_add", 3 * gb / t_add, ref, threads);
    const double t_mul = median_seconds([&] { cpu::binary(BinaryOp::mul, va, vb, vo); });
    emit("elementwise_mul", 3 * gb / t_mul, ref, threads);
    const double t_gelu = median_seconds([&] { cpu::unary(UnaryOp::gelu, 0.0, va, vo); });
    emit("elementwise_gelu", 2 * gb / t_gelu, ref, threads);
  }
  return 0;
}
