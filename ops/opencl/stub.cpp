// The public OpenCL API (ops/opencl/opencl.h) in a build without OpenCL: no devices.
#include "ops/error.h"
#include "ops/opencl/opencl.h"

namespace graft::opencl {

namespace {
[[noreturn]] void unavailable(int device) {
  throw Error(fmt::format("opencl:{}: graft was built without OpenCL; hint: install "
                          "ocl-icd-opencl-dev and reconfigure with -Dopencl=enabled",
                          device));
}
}  // namespace

bool built() { return false; }
std::vector<DeviceInfo> devices() { return {}; }
PoolStats pool_stats(int device) { unavailable(device); }
void reset_pool_stats(int device) { unavailable(device); }
void empty_cache(int device) { unavailable(device); }
void synchronize(int device) { unavailable(device); }
void set_matmul_kernel(MatmulKernel) {}
void set_cpu_fallback(bool) {}
bool cpu_fallback() { return false; }
uint64_t fallback_calls() { return 0; }

}  // namespace graft::opencl
