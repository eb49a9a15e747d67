// Conv1d, float32: the fast CPU kernels (oneDNN convolution primitives, cached) against the
// scalar reference kernels, forward, backward-data and backward-weights, on ABCNN-sized and
// larger problems. Prints one JSON object per line:
//   {"name": "conv1d_fwd_B32_C50_L24_K3_wide_t1", "value": <fast GFLOP/s>, "unit": "GFLOP/s",
//    "reference": <reference GFLOP/s>, "ratio": value/reference, "threads": 1, ...}
// Fast and reference runs alternate, so a noisy neighbour on shared cores slows both alike;
// each figure is the median over >= 0.3 s of runs (at least 3).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ops/cpu/cpu_kernels.h"
#include "ops/random.h"
#include "bench/timing.h"

namespace {

using graft::Conv1dArgs;
using graft::TensorView;

using graft::bench::median;
using graft::bench::seconds_of;

struct Buffer {
  std::vector<float> data;
  TensorView view;
  Buffer(graft::Shape shape, uint64_t seed) : data(size_t(shape.numel())) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = float(graft::philox_uniform(seed, i) - 0.5);
    view.data = data.data();
    view.dtype = graft::DType::f32;
    view.shape = shape;
    view.strides = graft::contiguous_strides(shape);
  }
};

void bench(int64_t B, int64_t C, int64_t L, int64_t K, bool wide, int threads) {
  omp_set_num_threads(threads);
  Conv1dArgs a;
  if (wide) a.pad_l = a.pad_r = K - 1;
  const int64_t Lout = L + a.pad_l + a.pad_r - K + 1;
  Buffer x({B, C, L}, 1), w({C, C, K}, 2), bias({C}, 3), y({B, C, Lout}, 4), y_ref({B, C, Lout}, 5);
  Buffer dy({B, C, Lout}, 6), dx({B, C, L}, 7), dw({C, C, K}, 8), db({C}, 9);
  const double flop = 2.0 * double(B) * double(C) * double(C) * double(Lout) * double(K);
  struct Pass {
    const char* name;
    std::function<void()> fast, ref;
  };
  const Pass passes[] = {
      {"fwd", [&] { graft::cpu_backend().conv1d(x.view, w.view, bias.view, a, y.view); },
       [&] { graft::cpu::ref::conv1d(x.view, w.view, bias.view, a, y_ref.view); }},
      {"bwd_data", [&] { graft::cpu_backend().conv1d_backward_input(dy.view, w.view, a, dx.view); },
       [&] { graft::cpu::ref::conv1d_backward_input(dy.view, w.view, a, dx.view); }},
      {"bwd_weights", [&] { graft::cpu_backend().conv1d_backward_weight(x.view, dy.view, a, dw.view, db.view); },
       [&] { graft::cpu::ref::conv1d_backward_weight(x.view, dy.view, a, dw.view, db.view); }},
  };
  for (const Pass& p : passes) {
    p.fast();  // warm-up: primitive creation, page faults
    std::vector<double> tf, tr;
    double total_f = 0, total_r = 0;
    while ((total_f < 0.3 || total_r < 0.3 || tf.size() < 3) && tf.size() < 2000) {
      tf.push_back(seconds_of(p.fast));
      total_f += tf.back();
      if (total_r < 0.3 || tr.size() < 3) {  // the reference is slow: stop timing it once enough
        tr.push_back(seconds_of(p.ref));
        total_r += tr.back();
      }
    }
    const double f = flop / median(tf) * 1e-9, r = flop / median(tr) * 1e-9;
    fmt::print("{{\"name\": \"conv1d_{}_B{}_C{}_L{}_K{}{}_t{}\", \"value\": {:.2f}, \"unit\": "
               "\"GFLOP/s\", \"reference\": {:.3f}, \"ratio\": {:.1f}, \"threads\": {}, "
               "\"pass\": \"{}\", \"fast_ms\": {:.4f}, \"reference_ms\": {:.3f}}}\n",
               p.name, B, C, L, K, wide ? "_wide" : "", threads, f, r, f / r, threads, p.name,
               median(tf) * 1e3, median(tr) * 1e3);
    std::fflush(stdout);
  }
  // sanity: the two forward results agree
  float worst = 0;
  for (size_t i = 0; i < y.data.size(); ++i) worst = std::max(worst, std::abs(y.data[i] - y_ref.data[i]));
  if (worst > 1e-3f) fmt::print(stderr, "warning: fast and reference conv1d differ by {}\n", worst);
}

}  // namespace

int main() {
  for (int threads : {1, 2}) {
    bench(32, 50, 24, 3, true, threads);    // ABCNN block: 50 filters, width 3, 24 words
    bench(8, 128, 128, 5, false, threads);  // a larger text CNN layer
  }
  return 0;
}
