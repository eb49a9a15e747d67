// OpenCL matmul on the first OpenCL device (PoCL on the CPU in CI): the tiled local-memory
// kernel with register blocking against the naive one-item-per-output kernel, float32,
// square n x n at 256, 512, 1024 (or the sizes given as arguments).
// Prints one JSON object per line:
//   {"name": "opencl_matmul_f32_1024", "value": <tiled GFLOP/s>, "unit": "GFLOP/s",
//    "reference": <naive GFLOP/s>, "ratio": value/reference, "n": 1024, "device": "..."}
// Each figure is the median of timed runs (clFinish after each) after one warm-up run, which
// also pays the program build; the two kernels alternate so a noisy neighbour slows both.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/functions.h"
#include "ops/kernels.h"
#include "ops/opencl/opencl.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double time_once(graft::opencl::MatmulKernel k, const graft::Tensor& a, const graft::Tensor& b,
                 const graft::Tensor& c) {
  graft::opencl::set_matmul_kernel(k);
  const graft::Backend* be = graft::backend_for(graft::Device::opencl(0));
  graft::opencl::synchronize(0);
  const auto t0 = Clock::now();
  be->matmul(a.kview(), b.kview(), c.kview());
  graft::opencl::synchronize(0);
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  setenv("POCL_MAX_PTHREAD_COUNT", "2", 0);
  using namespace graft;
  const auto devs = opencl::devices();
  if (devs.empty()) {
    fmt::print(stderr, "opencl_matmul: no OpenCL device (install pocl-opencl-icd)\n");
    return 1;
  }
  std::vector<int64_t> sizes = {256, 512, 1024};
  if (argc > 1) {
    sizes.clear();
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  }
  const Device dev = Device::opencl(0);
  for (int64_t n : sizes) {
    Generator g(1);
    Tensor a = uniform({n, n}, -0.5, 0.5, DType::f32, &g).to(dev);
    Tensor b = uniform({n, n}, -0.5, 0.5, DType::f32, &g).to(dev);
    Tensor c = empty({n, n}, TensorOptions(DType::f32).device(dev));
    time_once(opencl::MatmulKernel::tiled, a, b, c);  // warm-up (builds the kernels)
    time_once(opencl::MatmulKernel::naive, a, b, c);
    std::vector<double> tt, tn;
    double spent = 0;
    const int min_runs = 3;
    while (int(tt.size()) < min_runs || (spent < 2.0 && tt.size() < 20)) {
      tt.push_back(time_once(opencl::MatmulKernel::tiled, a, b, c));
      tn.push_back(time_once(opencl::MatmulKernel::naive, a, b, c));
      spent += tt.back() + tn.back();
    }
    const double flops = 2.0 * double(n) * double(n) * double(n);
    const double gt = flops / median(tt) * 1e-9, gn = flops / median(tn) * 1e-9;
    fmt::print("{{\"name\": \"opencl_matmul_f32_{}\", \"value\": {:.3f}, \"unit\": \"GFLOP/s\", "
               "\"reference\": {:.3f}, \"ratio\": {:.2f}, \"n\": {}, \"device\": \"{}\"}}\n",
               n, gt, gn, gt / gn, n, devs[0].name);
    std::fflush(stdout);
  }
  opencl::set_matmul_kernel(opencl::MatmulKernel::automatic);
  return 0;
}
