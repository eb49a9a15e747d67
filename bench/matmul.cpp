// Square f32 matmul: graft::cpu::matmul against oneDNN called directly (one primitive created
// up front, executed repeatedly), in the same run, for 1 and 2 OpenMP threads.
// Prints one JSON object per line:
//   {"name": "matmul_f32_1024_t2", "value": <graft GFLOP/s>, "unit": "GFLOP/s",
//    "reference": <oneDNN GFLOP/s>, "ratio": value/reference, "threads": 2, "n": 1024}
// The two are timed alternately, one run each in turn, so a noisy neighbour on the shared
// cores slows both alike; each figure is the median over >= 0.5 s of runs.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include <fmt/format.h>

#include "ops/cpu/cpu_kernels.h"
#include "ops/random.h"
#include "bench/timing.h"

namespace {


using graft::bench::median;
using graft::bench::seconds_of;

graft::TensorView matrix_view(float* p, int64_t n) {
  graft::TensorView v;
  v.data = p;
  v.dtype = graft::DType::f32;
  v.shape = {n, n};
  v.strides = graft::contiguous_strides(v.shape);
  return v;
}

void bench(int64_t n, int threads) {
  omp_set_num_threads(threads);
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n)), c_ref(size_t(n * n));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = float(graft::philox_uniform(1, i) - 0.5);
    b[i] = float(graft::philox_uniform(2, i) - 0.5);
  }

  // graft: C [n, n] = A [n, n] @ B [n, n]
  const graft::TensorView av = matrix_view(a.data(), n), bv = matrix_view(b.data(), n),
                          cv = matrix_view(c.data(), n);
  auto run_graft = [&] { graft::cpu_backend().matmul(av, bv, cv, graft::Precision::f32); };

  // oneDNN directly, the plain row-major case
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc md({n, n}, dnnl::memory::data_type::f32, tag::ab);
  dnnl::memory ma(md, eng, a.data()), mb(md, eng, b.data()), mc(md, eng, c_ref.data());
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng));
  auto run_dnnl = [&] {
    prim.execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    strm.wait();
  };

  run_graft();  // warm-up: primitive creation, page faults, caches
  run_dnnl();
  std::vector<double> tg, td;
  double total_g = 0, total_d = 0;
  while (total_g < 0.5 || total_d < 0.5 || tg.size() < 5) {
    tg.push_back(seconds_of(run_graft));
    td.push_back(seconds_of(run_dnnl));
    total_g += tg.back();
    total_d += td.back();
  }
  // Same numbers from both (same primitive kind on the same data); a cheap sanity check.
  float worst = 0;
  for (size_t i = 0; i < c.size(); ++i) worst = std::max(worst, std::abs(c[i] - c_ref[i]));
  if (worst > 1e-3f) fmt::print(stderr, "warning: n={} graft and oneDNN differ by {}\n", n, worst);

  const double flop = 2.0 * double(n) * double(n) * double(n);
  const double g = flop / median(tg) * 1e-9, d = flop / median(td) * 1e-9;
  fmt::print(
      "{{\"name\": \"matmul_f32_{}_t{}\", \"value\": {:.2f}, \"unit\": \"GFLOP/s\", "
      "\"reference\": {:.2f}, \"ratio\": {:.3f}, \"threads\": {}, \"n\": {}}}\n",
      n, threads, g, d, g / d, threads, n);
  std::fflush(stdout);
}

}  // namespace

int main() {
  for (int64_t n : {256, 512, 1024, 2048})
    for (int threads : {1, 2}) bench(n, threads);
  return 0;
}
