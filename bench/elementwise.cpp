// Bandwidth of the fast elementwise kernels on 16M float32 elements (contiguous, out of place)
// against memcpy measured in the same run with the same thread count. Prints one JSON object
// per line:
//   {"name": "elementwise_add", "value": GB/s, "unit": "GB/s", "reference": memcpy GB/s,
//    "ratio": value / reference, "threads": n}
// Bytes count reads + writes: add/mul move 3 arrays (2 read, 1 written), gelu and memcpy 2,
// the random fills (uniform; dropout's mask, p = 0.1) 1: their cost is the Philox arithmetic.
// The memcpy reference copies one 16M-float array (split across the same threads). Each
// figure is the median of 15 rounds.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "bench/timing.h"
#include "ops/cpu/cpu_kernels.h"

using namespace graft;

namespace {

constexpr int64_t kN = int64_t(16) << 20;  // elements per array
constexpr int kReps = 15;

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median wall time of each of `fns` over kReps rounds, after one warm-up round (page faults,
// thread start-up). Rounds run every function once, in turn, so a slow spell of a shared
// machine hits the kernels and the memcpy reference alike.
std::vector<double> median_seconds(const std::vector<std::function<void()>>& fns) {
  for (auto& f : fns) f();
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < kReps; ++r)
    for (size_t i = 0; i < fns.size(); ++i) t[i].push_back(seconds(fns[i]));
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

TensorView view(float* p) {
  TensorView v;
  v.data = p;
  v.dtype = DType::f32;
  v.shape = Shape{kN};
  v.strides = contiguous_strides(v.shape);
  return v;
}

using graft::bench::emit_gbps;

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
    auto memcpy_threads = [&] {
#pragma omp parallel for schedule(static)
      for (int t = 0; t < threads; ++t) {
        const int64_t lo = kN * t / threads, hi = kN * (t + 1) / threads;
        std::memcpy(out.data() + lo, a.data() + lo, (hi - lo) * sizeof(float));
      }
    };
    const auto t = median_seconds({
        memcpy_threads,
        [&] { cpu_backend().binary(BinaryOp::add, va, vb, vo); },
        [&] { cpu_backend().binary(BinaryOp::mul, va, vb, vo); },
        [&] { cpu_backend().unary(UnaryOp::gelu, 0.0, va, vo); },
        [&] { cpu_backend().uniform(vo, 7, 0); },
        [&] { cpu_backend().dropout_mask(vo, 0.1, 7, 0); },
    });
    const double ref = 2 * gb / t[0];
    emit_gbps("elementwise_add", 3 * gb / t[1], ref, threads);
    emit_gbps("elementwise_mul", 3 * gb / t[2], ref, threads);
    emit_gbps("elementwise_gelu", 2 * gb / t[3], ref, threads);
    emit_gbps("random_uniform", gb / t[4], ref, threads);
    emit_gbps("random_dropout_mask", gb / t[5], ref, threads);
  }
  return 0;
}
