// Bandwidth of the fused AdamW step (Backend::adam_step) over 10M float32 parameters held in
// 10 tensors of 1M, against memcpy measured in the same run with the same thread count. Prints
// one JSON object per line:
//   {"name": "optim_step_adamw", "value": GB/s, "unit": "GB/s", "reference": memcpy GB/s,
//    "ratio": value / reference, "threads": n}
// Bytes count reads + writes: 28 per parameter (param, grad, m, v read; param, m, v written).
// The memcpy reference copies 14 bytes per parameter (140 MB read + 140 MB written), so both
// move the same 280 MB per run.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "autograd/tensor.h"
#include "bench/timing.h"
#include "ops/cpu/cpu_kernels.h"

using namespace graft;

namespace {

constexpr int kTensors = 10;
constexpr int64_t kPerTensor = int64_t(1) << 20;  // ~1M parameters per tensor
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

using graft::bench::emit_gbps;

}  // namespace

int main() {
  // param, grad, m, v per tensor; values in a realistic range (v > 0)
  std::vector<Tensor> p, g, m, v;
  for (int k = 0; k < kTensors; ++k) {
    p.push_back(uniform({kPerTensor}, -0.1, 0.1));
    g.push_back(uniform({kPerTensor}, -1e-3, 1e-3));
    m.push_back(uniform({kPerTensor}, -1e-4, 1e-4));
    v.push_back(uniform({kPerTensor}, 1e-8, 1e-6));
  }
  const int64_t n = kTensors * kPerTensor;
  const int64_t copy_floats = n * 14 / 4 / 2;  // 14 bytes per parameter read, 14 written
  std::vector<float> src(copy_floats, 1.0f), dst(copy_floats, 0.0f);

  AdamStepArgs a;  // PyTorch AdamW defaults, at step 100
  a.lr = 1e-3;
  a.weight_decay = 1e-2;
  a.decoupled = true;
  a.bias_correction1 = 1 - std::pow(a.beta1, 100);
  a.bias_correction2 = 1 - std::pow(a.beta2, 100);

  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const double t_copy = median_seconds([&] {
#pragma omp parallel for schedule(static)
      for (int t = 0; t < threads; ++t) {
        const int64_t lo = copy_floats * t / threads, hi = copy_floats * (t + 1) / threads;
        std::memcpy(dst.data() + lo, src.data() + lo, (hi - lo) * sizeof(float));
      }
    });
    const double ref = 2.0 * copy_floats * sizeof(float) / 1e9 / t_copy;
    const double t_step = median_seconds([&] {
      for (int k = 0; k < kTensors; ++k)
        cpu_backend().adam_step(p[k].kview(), g[k].kview(), m[k].kview(), v[k].kview(), a);
    });
    emit_gbps("optim_step_adamw", 28.0 * n / 1e9 / t_step, ref, threads);
  }
  return 0;
}
