// OpenCL runtime of the back-end (internal to ops/opencl): one context and in-order queue per
// device, the caching buffer pool behind Storage, programs compiled once per (context, dtype),
// and a small kernel-launch helper. Every OpenCL error becomes a graft::Error naming the call,
// the error code and the op.
//
// Device memory and TensorView::data: Storage keeps a `void*` and autograd adds byte offsets
// to it, so a device buffer is handed out as a *virtual address* (a unique, never dereferenced
// number); resolve() maps any address inside a buffer back to (cl_mem, byte offset).
#pragma once
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/shape.h"
#include "ops/view.h"

namespace graft::ocl {

const char* error_name(cl_int err);
[[noreturn]] void fail(cl_int err, const char* call, const char* op);
inline void check(cl_int err, const char* call, const char* op) {
  if (err != CL_SUCCESS) fail(err, call, op);
}

class Context {
 public:
  explicit Context(int index);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int index;
  cl_device_id device = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  bool fp64 = false;
  bool is_cpu_device = false;  // CL_DEVICE_TYPE_CPU (PoCL): picks CPU-friendly kernels
  size_t max_work_group = 0;
  std::string name;
  std::mutex mu;  // serialises kernel-argument setting and enqueueing

  // The kernel `name` of the program for element type `t` (built on first use, then cached).
  cl_kernel kernel(DType t, const std::string& name, const char* op);

 private:
  cl_program program(DType t, const char* op);
  cl_program programs_[4] = {};
  std::unordered_map<std::string, cl_kernel> kernels_[4];
};

// The context of Device::opencl(index): created on first use; graft::Error if no such device.
Context& context(int index);

struct BufRef {
  cl_mem mem = nullptr;
  size_t offset = 0;  // bytes
};
// The buffer holding virtual address `addr` (graft::Error if it is not a device address).
BufRef resolve(const void* addr, const char* op);

// Kernel arguments of a flattened strided loop: shape and up to 4 operands' strides (elements).
// Matches `Layout` in kernels/common.cl.
struct Layout {
  int32_t rank = 0;
  int32_t pad = 0;
  int64_t shape[kMaxDims] = {};
  int64_t st[4][kMaxDims] = {};
};
// The layout of `shape` with the operands' strides; size-1 dims are dropped and dims that are
// contiguous in every operand are merged (a contiguous tensor becomes rank 1).
Layout make_layout(const Shape& shape, std::initializer_list<const Strides*> strides,
                   bool coalesce = true);

// Sets arguments in order and enqueues: Launch(ctx, dtype, "kernel", "op").buf(x).val(n).run(n).
class Launch {
 public:
  Launch(Context& c, DType program, const char* kernel, const char* op);
  // A tensor argument: (__global T* p, long offset_in_elements); data == nullptr passes NULL.
  Launch& buf(const TensorView& v);
  template <class V> Launch& val(const V& v) {
    check(clSetKernelArg(k_, i_++, sizeof(V), &v), "clSetKernelArg", op_);
    return *this;
  }
  // A scalar of the program's element type (float or double; int64 / uchar for those).
  Launch& scalar(double v);
  Launch& local(size_t bytes) {
    check(clSetKernelArg(k_, i_++, bytes, nullptr), "clSetKernelArg", op_);
    return *this;
  }
  // 1-D launch over `global` items (rounded up to a multiple of `local` when given).
  void run(size_t global, size_t local = 0);
  void run(int dims, const size_t* global, const size_t* local);

 private:
  Context& c_;
  std::unique_lock<std::mutex> lock_;
  DType t_;
  cl_kernel k_;
  cl_uint i_ = 0;
  const char* op_;
};

// Per-dtype OpenCL C source of the elementwise functions, generated from ops/functors.h.
std::string generate_elementwise(DType t);
// COMPARE_KERNEL(name, op) lines for every compare op (all dtypes).
std::string generate_compare();
// The embedded .cl files (generated at build time from ops/opencl/kernels/*.cl).
const char* embedded_source(const char* file);

// n bytes between any two of host and device addresses (blocking for device -> host).
void copy_bytes(void* dst, Device dd, const void* src, Device sd, size_t n);

// Registers the back-end table, the Storage allocator and the copy hook (called once).
void register_opencl();

}  // namespace graft::ocl
