// Public face of the OpenCL back-end (no OpenCL headers needed): device listing, buffer-pool
// statistics, and the opt-in CPU fallback. Kernels are reached through backend_for(device).
// In a build without OpenCL these functions exist too and report no devices.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace graft::opencl {

struct DeviceInfo {
  int index = 0;              // the N of Device::opencl(N)
  std::string platform;       // platform name
  std::string name;           // device name
  std::string version;        // e.g. "OpenCL 3.0 PoCL ..."
  std::string driver;         // driver version
  std::string type;           // "gpu", "cpu", "accelerator"
  uint32_t compute_units = 0;
  uint64_t global_mem = 0;    // bytes
  uint64_t local_mem = 0;     // bytes
  uint64_t max_work_group = 0;
  bool fp64 = false;
};

// Whether this build has the OpenCL back-end compiled in.
bool built();
// Every device of every platform, numbered in order (empty without OpenCL or an ICD).
std::vector<DeviceInfo> devices();

// Buffer pool of one device: hits are allocations served from cached buffers, misses called
// clCreateBuffer. Bytes are the pooled capacities (powers of two).
struct PoolStats {
  uint64_t hits = 0, misses = 0, live_bytes = 0, cached_bytes = 0, live_buffers = 0;
  double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
};
PoolStats pool_stats(int device);
void reset_pool_stats(int device);
// Returns every cached (free) buffer of the device to the driver.
void empty_cache(int device);
// Blocks until every queued command on the device has finished.
void synchronize(int device);

// Which matmul kernel runs; for benchmarks and tests. automatic: `vec` (register-blocked
// vectors) on CPU devices when b has unit column stride, else `tiled` (local memory), and
// `naive` for tiny products.
enum class MatmulKernel { automatic, naive, tiled, vec };
void set_matmul_kernel(MatmulKernel k);

// The opt-in CPU fallback: while on, an op with no OpenCL kernel runs its CPU kernel on host
// copies of the device data (one warning per op on stderr) instead of raising "no kernel for
// device". Starts on when the environment has GRAFT_OPENCL_FALLBACK=1. Not thread-safe against
// ops running concurrently on other threads.
void set_cpu_fallback(bool on);
bool cpu_fallback();
// How many kernel calls the fallback has run on the CPU so far (tests, diagnostics).
uint64_t fallback_calls();

}  // namespace graft::opencl
