// OpenCL matmul on the first OpenCL device (PoCL on the CPU in CI), float32, square n x n at
// 256, 512, 1024 (or the sizes given as arguments): the kernel graft picks for the device
// (on a CPU device the register-blocked vector kernel, on a GPU the local-memory tiled one)
// against the naive one-item-per-output kernel; the local-memory tiled kernel's figure is
// reported too. Prints one JSON object per line:
//   {"name": "opencl_matmul_f32_1024", "value": <chosen kernel GFLOP/s>, "unit": "GFLOP/s",
//    "reference": <naive GFLOP/s>, "ratio": value/reference, "tiled_local": <GFLOP/s>,
//    "vec": <GFLOP/s>, "n": 1024, "device": "..."}
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
#include "bench/timing.h"

namespace {

using Clock = std::chrono::steady_clock;

using graft::bench::median;

double time_once(graft::opencl::MatmulKernel k, const graft::Tensor& a, const graft::Tensor& b,
                 const graft::Tensor& c) {
  graft::opencl::set_matmul_kernel(k);
  const graft::Backend* be = graft::backend_for(graft::Device::opencl(0));
  graft::opencl::synchronize(0);
  const auto t0 = Clock::now();
  be->matmul(a.kview(), b.kview(), c.kview(), graft::Precision::f32);
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
    using MK = opencl::MatmulKernel;
    const MK kinds[] = {MK::automatic, MK::naive, MK::tiled, MK::vec};
    for (MK k : kinds) time_once(k, a, b, c);  // warm-up (builds the kernels)
    std::vector<double> times[4];
    double spent = 0;
    while (times[0].size() < 3 || (spent < 3.0 && times[0].size() < 20)) {
      for (int i = 0; i < 4; ++i) {
        times[i].push_back(time_once(kinds[i], a, b, c));
        spent += times[i].back();
      }
    }
    const double flops = 2.0 * double(n) * double(n) * double(n);
    double gf[4];
    for (int i = 0; i < 4; ++i) gf[i] = flops / median(times[i]) * 1e-9;
    fmt::print("{{\"name\": \"opencl_matmul_f32_{}\", \"value\": {:.3f}, \"unit\": \"GFLOP/s\", "
               "\"reference\": {:.3f}, \"ratio\": {:.2f}, \"tiled_local\": {:.3f}, \"vec\": {:.3f}, "
               "\"n\": {}, \"device\": \"{}\"}}\n",
               n, gf[0], gf[1], gf[0] / gf[1], gf[2], gf[3], n, devs[0].name);
    std::fflush(stdout);
  }
  opencl::set_matmul_kernel(opencl::MatmulKernel::automatic);
  return 0;
}
