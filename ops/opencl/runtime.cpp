// OpenCL runtime: device discovery, contexts and queues, error names, the caching buffer pool
// (virtual device addresses, see runtime.h), program builds and host<->device copies.
#include "ops/opencl/runtime.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "ops/error.h"
#include "ops/opencl/opencl.h"
#include "ops/storage.h"

namespace graft::ocl {

// ------------------------------------------------------------------ errors
const char* error_name(cl_int err) {
  switch (err) {
#define GRAFT_CL_ERR(e) \
  case e: return #e;
    GRAFT_CL_ERR(CL_SUCCESS) GRAFT_CL_ERR(CL_DEVICE_NOT_FOUND) GRAFT_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    GRAFT_CL_ERR(CL_COMPILER_NOT_AVAILABLE) GRAFT_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    GRAFT_CL_ERR(CL_OUT_OF_RESOURCES) GRAFT_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    GRAFT_CL_ERR(CL_PROFILING_INFO_NOT_AVAILABLE) GRAFT_CL_ERR(CL_MEM_COPY_OVERLAP)
    GRAFT_CL_ERR(CL_IMAGE_FORMAT_MISMATCH) GRAFT_CL_ERR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    GRAFT_CL_ERR(CL_BUILD_PROGRAM_FAILURE) GRAFT_CL_ERR(CL_MAP_FAILURE)
    GRAFT_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    GRAFT_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    GRAFT_CL_ERR(CL_COMPILE_PROGRAM_FAILURE) GRAFT_CL_ERR(CL_LINKER_NOT_AVAILABLE)
    GRAFT_CL_ERR(CL_LINK_PROGRAM_FAILURE) GRAFT_CL_ERR(CL_DEVICE_PARTITION_FAILED)
    GRAFT_CL_ERR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) GRAFT_CL_ERR(CL_INVALID_VALUE)
    GRAFT_CL_ERR(CL_INVALID_DEVICE_TYPE) GRAFT_CL_ERR(CL_INVALID_PLATFORM)
    GRAFT_CL_ERR(CL_INVALID_DEVICE) GRAFT_CL_ERR(CL_INVALID_CONTEXT)
    GRAFT_CL_ERR(CL_INVALID_QUEUE_PROPERTIES) GRAFT_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    GRAFT_CL_ERR(CL_INVALID_HOST_PTR) GRAFT_CL_ERR(CL_INVALID_MEM_OBJECT)
    GRAFT_CL_ERR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) GRAFT_CL_ERR(CL_INVALID_IMAGE_SIZE)
    GRAFT_CL_ERR(CL_INVALID_SAMPLER) GRAFT_CL_ERR(CL_INVALID_BINARY)
    GRAFT_CL_ERR(CL_INVALID_BUILD_OPTIONS) GRAFT_CL_ERR(CL_INVALID_PROGRAM)
    GRAFT_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE) GRAFT_CL_ERR(CL_INVALID_KERNEL_NAME)
    GRAFT_CL_ERR(CL_INVALID_KERNEL_DEFINITION) GRAFT_CL_ERR(CL_INVALID_KERNEL)
    GRAFT_CL_ERR(CL_INVALID_ARG_INDEX) GRAFT_CL_ERR(CL_INVALID_ARG_VALUE)
    GRAFT_CL_ERR(CL_INVALID_ARG_SIZE) GRAFT_CL_ERR(CL_INVALID_KERNEL_ARGS)
    GRAFT_CL_ERR(CL_INVALID_WORK_DIMENSION) GRAFT_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    GRAFT_CL_ERR(CL_INVALID_WORK_ITEM_SIZE) GRAFT_CL_ERR(CL_INVALID_GLOBAL_OFFSET)
    GRAFT_CL_ERR(CL_INVALID_EVENT_WAIT_LIST) GRAFT_CL_ERR(CL_INVALID_EVENT)
    GRAFT_CL_ERR(CL_INVALID_OPERATION) GRAFT_CL_ERR(CL_INVALID_GL_OBJECT)
    GRAFT_CL_ERR(CL_INVALID_BUFFER_SIZE) GRAFT_CL_ERR(CL_INVALID_MIP_LEVEL)
    GRAFT_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE) GRAFT_CL_ERR(CL_INVALID_PROPERTY)
    GRAFT_CL_ERR(CL_INVALID_IMAGE_DESCRIPTOR) GRAFT_CL_ERR(CL_INVALID_COMPILER_OPTIONS)
    GRAFT_CL_ERR(CL_INVALID_LINKER_OPTIONS) GRAFT_CL_ERR(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef GRAFT_CL_ERR
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL error";
  }
}

void fail(cl_int err, const char* call, const char* op) {
  throw Error(fmt::format("{}: OpenCL call {} failed with {} ({}){}", op, call, error_name(err),
                          err,
                          err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES
                              ? "; hint: the device may be out of memory (try smaller batches)"
                              : ""));
}

// ------------------------------------------------------------------ devices
namespace {

struct DeviceEntry {
  cl_platform_id platform;
  cl_device_id device;
};

const std::vector<DeviceEntry>& device_list() {
  static const std::vector<DeviceEntry> list = [] {
    std::vector<DeviceEntry> out;
    cl_uint np = 0;
    if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return out;
    std::vector<cl_platform_id> ps(np);
    if (clGetPlatformIDs(np, ps.data(), nullptr) != CL_SUCCESS) return out;
    for (cl_platform_id p : ps) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> ds(nd);
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr) != CL_SUCCESS) continue;
      for (cl_device_id d : ds) out.push_back({p, d});
    }
    return out;
  }();
  return list;
}

// A string property of a device or platform through its clGet*Info (size query, then the
// bytes, trailing NULs dropped); "" when the query fails or the property is empty.
template <class Object, class Info>
std::string info_string(cl_int (*get_info)(Object, Info, size_t, void*, size_t*), Object o, Info what) {
  size_t n = 0;
  if (get_info(o, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  get_info(o, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}
std::string device_string(cl_device_id d, cl_device_info what) { return info_string(clGetDeviceInfo, d, what); }
template <class V> V device_value(cl_device_id d, cl_device_info what) {
  V v{};
  clGetDeviceInfo(d, what, sizeof(V), &v, nullptr);
  return v;
}
std::string platform_string(cl_platform_id p, cl_platform_info what) {
  return info_string(clGetPlatformInfo, p, what);
}
bool has_fp64(cl_device_id d) {
  return device_value<cl_device_fp_config>(d, CL_DEVICE_DOUBLE_FP_CONFIG) != 0 ||
         device_string(d, CL_DEVICE_EXTENSIONS).find("cl_khr_fp64") != std::string::npos;
}

std::mutex g_contexts_mu;
// Contexts live for the whole process (never destroyed: Storage destructors may run late).
std::vector<Context*>& contexts() {
  static auto* v = new std::vector<Context*>();
  return *v;
}

}  // namespace

Context& context(int index) {
  std::lock_guard<std::mutex> lock(g_contexts_mu);
  auto& cs = contexts();
  const auto& list = device_list();
  GRAFT_CHECK(index >= 0 && size_t(index) < list.size(),
              "opencl:{}: no such OpenCL device ({} found); hint: run `graft devices` to list "
              "them, or install an OpenCL driver (e.g. pocl-opencl-icd)",
              index, list.size());
  if (cs.size() <= size_t(index)) cs.resize(size_t(index) + 1, nullptr);
  if (!cs[size_t(index)]) cs[size_t(index)] = new Context(index);
  return *cs[size_t(index)];
}

Context::Context(int i) : index(i) {
  const DeviceEntry& e = device_list()[size_t(i)];
  device = e.device;
  cl_int err = CL_SUCCESS;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, cl_context_properties(e.platform), 0};
  ctx = clCreateContext(props, 1, &device, nullptr, nullptr, &err);
  check(err, "clCreateContext", "opencl");
  queue = clCreateCommandQueue(ctx, device, 0, &err);
  check(err, "clCreateCommandQueue", "opencl");
  fp64 = has_fp64(device);
  is_cpu_device = (device_value<cl_device_type>(device, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU) != 0;
  max_work_group = device_value<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  name = device_string(device, CL_DEVICE_NAME);
}

namespace {
const char* type_name(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i64: return "long";
    case DType::b8: return "uchar";
  }
  return "?";
}
}  // namespace

cl_program Context::program(DType t, const char* op) {
  const int ti = int(t);
  if (programs_[ti]) return programs_[ti];
  GRAFT_CHECK(t != DType::f64 || fp64,
              "{}: device opencl:{} ({}) has no float64 support; hint: use float32 or the CPU", op,
              index, name);
  const bool fl = is_floating(t);
  std::string src = fmt::format(
      "#define T {}\n#define IS_FLOAT {}\n#define T_IS_F32 {}\n#define T_IS_F64 {}\n"
      "#define T_IS_B8 {}\n",
      type_name(t), fl ? 1 : 0, t == DType::f32 ? 1 : 0, t == DType::f64 ? 1 : 0,
      t == DType::b8 ? 1 : 0);
  src += embedded_source("common.cl");
  src += embedded_source("elementwise.cl");
  src += generate_compare();
  src += embedded_source("index.cl");
  if (fl) {
    src += generate_elementwise(t);
    for (const char* f : {"reduce.cl", "matmul.cl", "norm.cl", "loss.cl", "random.cl", "optim.cl",
                          "conv.cl", "attention.cl"})  // attention.cl uses random.cl's philox2
      src += embedded_source(f);
  }
  const char* s = src.c_str();
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(ctx, 1, &s, nullptr, &err);
  check(err, "clCreateProgramWithSource", op);
  err = clBuildProgram(p, 1, &device, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    clReleaseProgram(p);
    throw Error(fmt::format("{}: building the OpenCL program for {} on opencl:{} ({}) failed with "
                            "{}:\n{}",
                            op, dtype_name(t), index, name, error_name(err), log.substr(0, 4000)));
  }
  programs_[ti] = p;
  return p;
}

cl_kernel Context::kernel(DType t, const std::string& kname, const char* op) {
  std::lock_guard<std::mutex> lock(mu);
  auto& ks = kernels_[int(t)];
  auto it = ks.find(kname);
  if (it != ks.end()) return it->second;
  cl_program p = program(t, op);
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p, kname.c_str(), &err);
  if (err == CL_INVALID_KERNEL_NAME)
    throw Error(fmt::format("{}: no OpenCL kernel '{}' for {}", op, kname, dtype_name(t)));
  check(err, "clCreateKernel", op);
  ks.emplace(kname, k);
  return k;
}

// ------------------------------------------------------------------ buffer pool
namespace {

constexpr uintptr_t kAddrBase = uintptr_t(1) << 44;
constexpr size_t kMinBlock = 256;

struct Block {
  cl_mem mem;
  size_t cap;
  int dev;
  bool live;
};

struct DevicePool {
  std::map<size_t, std::vector<uintptr_t>> free;  // capacity -> cached blocks
  opencl::PoolStats stats;
  uint64_t limit = 0;  // most bytes kept cached
};

struct Pool {
  std::mutex mu;
  std::map<uintptr_t, Block> blocks;  // base address -> block
  std::vector<DevicePool> devs;
  uintptr_t next = kAddrBase;
  DevicePool& dev(int i) {
    if (devs.size() <= size_t(i)) devs.resize(size_t(i) + 1);
    return devs[size_t(i)];
  }
};
Pool& pool() {
  static auto* p = new Pool();  // never destroyed (see contexts())
  return *p;
}

size_t capacity_for(size_t n) {
  size_t c = kMinBlock;
  while (c < n) c <<= 1;
  return c;
}

void* device_alloc(size_t nbytes, Device d) {
  Context& c = context(d.index);
  const size_t cap = capacity_for(nbytes);
  Pool& P = pool();
  {
    std::lock_guard<std::mutex> lock(P.mu);
    DevicePool& dp = P.dev(d.index);
    auto it = dp.free.find(cap);
    if (it != dp.free.end() && !it->second.empty()) {
      uintptr_t a = it->second.back();
      it->second.pop_back();
      P.blocks[a].live = true;
      ++dp.stats.hits;
      ++dp.stats.live_buffers;
      dp.stats.cached_bytes -= cap;
      dp.stats.live_bytes += cap;
      return reinterpret_cast<void*>(a);
    }
  }
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE, cap, nullptr, &err);
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
      err == CL_INVALID_BUFFER_SIZE) {
    opencl::empty_cache(d.index);  // retry once without the cached buffers
    m = clCreateBuffer(c.ctx, CL_MEM_READ_WRITE, cap, nullptr, &err);
  }
  if (err != CL_SUCCESS)
    throw Error(fmt::format("allocating {} bytes on {}: OpenCL call clCreateBuffer failed with {}; "
                            "hint: the device may be out of memory",
                            nbytes, d.str(), error_name(err)));
  std::lock_guard<std::mutex> lock(P.mu);
  DevicePool& dp = P.dev(d.index);
  const uintptr_t a = P.next;
  P.next += cap + 4096;  // a gap: an end-of-buffer address never falls into the next block
  P.blocks[a] = Block{m, cap, d.index, true};
  ++dp.stats.misses;
  ++dp.stats.live_buffers;
  dp.stats.live_bytes += cap;
  return reinterpret_cast<void*>(a);
}

void device_free(void* p, Device d) {
  Pool& P = pool();
  std::lock_guard<std::mutex> lock(P.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = P.blocks.find(a);
  if (it == P.blocks.end()) return;
  DevicePool& dp = P.dev(d.index);
  Block& b = it->second;
  b.live = false;
  --dp.stats.live_buffers;
  dp.stats.live_bytes -= b.cap;
  if (dp.limit == 0) {
    const uint64_t mem = opencl::devices().size() > size_t(d.index)
                             ? opencl::devices()[size_t(d.index)].global_mem
                             : 0;
    dp.limit = std::max<uint64_t>(uint64_t(64) << 20, mem / 4);
  }
  if (dp.stats.cached_bytes + b.cap > dp.limit) {
    clReleaseMemObject(b.mem);
    P.blocks.erase(it);
    return;
  }
  dp.free[b.cap].push_back(a);
  dp.stats.cached_bytes += b.cap;
}

void copy_hook(void* dst, Device dd, const void* src, Device sd, size_t n) {
  const char* op = "to";
  if (!dd.is_cpu() && sd.is_cpu()) {
    BufRef r = resolve(dst, op);
    Context& c = context(dd.index);
    std::lock_guard<std::mutex> lock(c.mu);
    check(clEnqueueWriteBuffer(c.queue, r.mem, CL_TRUE, r.offset, n, src, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer", op);
  } else if (dd.is_cpu() && !sd.is_cpu()) {
    BufRef r = resolve(src, op);
    Context& c = context(sd.index);
    std::lock_guard<std::mutex> lock(c.mu);
    check(clEnqueueReadBuffer(c.queue, r.mem, CL_TRUE, r.offset, n, dst, 0, nullptr, nullptr),
          "clEnqueueReadBuffer", op);
  } else if (dd == sd) {
    BufRef a = resolve(dst, op), b = resolve(src, op);
    Context& c = context(dd.index);
    std::lock_guard<std::mutex> lock(c.mu);
    check(clEnqueueCopyBuffer(c.queue, b.mem, a.mem, b.offset, a.offset, n, 0, nullptr, nullptr),
          "clEnqueueCopyBuffer", op);
  } else {  // two OpenCL devices: through the host
    std::vector<char> tmp(n);
    copy_hook(tmp.data(), Device::cpu(), src, sd, n);
    copy_hook(dst, dd, tmp.data(), Device::cpu(), n);
  }
}

}  // namespace

BufRef resolve(const void* addr, const char* op) {
  Pool& P = pool();
  std::lock_guard<std::mutex> lock(P.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  auto it = P.blocks.upper_bound(a);
  GRAFT_CHECK(it != P.blocks.begin(), "{}: {} is not an OpenCL device address", op, addr);
  --it;
  GRAFT_CHECK(a - it->first <= it->second.cap, "{}: {} is not an OpenCL device address", op, addr);
  return {it->second.mem, size_t(a - it->first)};
}

// ------------------------------------------------------------------ layouts and launches
Layout make_layout(const Shape& shape, std::initializer_list<const Strides*> strides,
                   bool coalesce) {
  GRAFT_ASSERT(strides.size() <= 4);
  Layout L;
  const int nops = int(strides.size());
  const Strides* ops[4] = {};
  int k = 0;
  for (const Strides* s : strides) ops[k++] = s;
  int r = 0;
  for (int d = 0; d < shape.size(); ++d) {
    if (coalesce && shape[d] == 1) continue;
    if (coalesce && r > 0) {
      bool merge = true;  // dim d continues dim r-1 in every operand
      for (int o = 0; o < nops; ++o)
        if (L.st[o][r - 1] != (*ops[o])[d] * shape[d]) merge = false;
      if (merge) {
        L.shape[r - 1] *= shape[d];
        for (int o = 0; o < nops; ++o) L.st[o][r - 1] = (*ops[o])[d];
        continue;
      }
    }
    L.shape[r] = shape[d];
    for (int o = 0; o < nops; ++o) L.st[o][r] = (*ops[o])[d];
    ++r;
  }
  L.rank = r;
  return L;
}

Launch::Launch(Context& c, DType program, const char* kernel, const char* op)
    : c_(c), t_(program), k_(c.kernel(program, kernel, op)), op_(op) {
  lock_ = std::unique_lock<std::mutex>(c.mu);
}

Launch& Launch::buf(const TensorView& v) {
  cl_mem m = nullptr;
  cl_long off = 0;
  if (v.data) {
    GRAFT_CHECK(!v.device.is_cpu(), "{}: got a CPU tensor where an OpenCL one was expected", op_);
    BufRef r = resolve(v.data, op_);
    m = r.mem;
    off = cl_long(r.offset / dtype_size(v.dtype));
  }
  check(clSetKernelArg(k_, i_++, sizeof(cl_mem), &m), "clSetKernelArg", op_);
  check(clSetKernelArg(k_, i_++, sizeof(cl_long), &off), "clSetKernelArg", op_);
  return *this;
}

Launch& Launch::scalar(double v) {
  switch (t_) {
    case DType::f32: return val(cl_float(v));
    case DType::f64: return val(cl_double(v));
    case DType::i64: return val(cl_long(v));
    case DType::b8: return val(cl_uchar(v != 0));
  }
  return *this;
}

void Launch::run(size_t global, size_t local) {
  if (global == 0) return;
  if (local) global = (global + local - 1) / local * local;
  run(1, &global, local ? &local : nullptr);
}

void Launch::run(int dims, const size_t* global, const size_t* local) {
  for (int d = 0; d < dims; ++d)
    if (global[d] == 0) return;
  check(clEnqueueNDRangeKernel(c_.queue, k_, cl_uint(dims), nullptr, global, local, 0, nullptr,
                               nullptr),
        "clEnqueueNDRangeKernel", op_);
}

void copy_bytes(void* dst, Device dd, const void* src, Device sd, size_t n) {
  if (n) copy_hook(dst, dd, src, sd, n);
}

void register_storage_hooks() {
  Storage::set_device_allocator(Device::Kind::opencl, device_alloc, device_free);
  Storage::set_device_copier(Device::Kind::opencl, copy_hook);
}

}  // namespace graft::ocl

// ------------------------------------------------------------------ public API (opencl.h)
namespace graft::opencl {

bool built() { return true; }

std::vector<DeviceInfo> devices() {
  static const std::vector<DeviceInfo> infos = [] {
    std::vector<DeviceInfo> out;
    const auto& list = ocl::device_list();
    for (size_t i = 0; i < list.size(); ++i) {
      cl_device_id d = list[i].device;
      DeviceInfo info;
      info.index = int(i);
      info.platform = ocl::platform_string(list[i].platform, CL_PLATFORM_NAME);
      info.name = ocl::device_string(d, CL_DEVICE_NAME);
      info.version = ocl::device_string(d, CL_DEVICE_VERSION);
      info.driver = ocl::device_string(d, CL_DRIVER_VERSION);
      const auto type = ocl::device_value<cl_device_type>(d, CL_DEVICE_TYPE);
      info.type = type & CL_DEVICE_TYPE_GPU           ? "gpu"
                  : type & CL_DEVICE_TYPE_CPU         ? "cpu"
                  : type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator"
                                                      : "other";
      info.compute_units = ocl::device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
      info.global_mem = ocl::device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
      info.local_mem = ocl::device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE);
      info.max_work_group = ocl::device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      info.fp64 = ocl::has_fp64(d);
      out.push_back(info);
    }
    return out;
  }();
  return infos;
}

PoolStats pool_stats(int device) {
  auto& P = ocl::pool();
  std::lock_guard<std::mutex> lock(P.mu);
  return P.dev(device).stats;
}

void reset_pool_stats(int device) {
  auto& P = ocl::pool();
  std::lock_guard<std::mutex> lock(P.mu);
  auto& s = P.dev(device).stats;
  s.hits = s.misses = 0;
}

void empty_cache(int device) {
  auto& P = ocl::pool();
  std::lock_guard<std::mutex> lock(P.mu);
  auto& dp = P.dev(device);
  for (auto& [cap, addrs] : dp.free)
    for (uintptr_t a : addrs) {
      auto it = P.blocks.find(a);
      if (it == P.blocks.end()) continue;
      clReleaseMemObject(it->second.mem);
      P.blocks.erase(it);
    }
  dp.free.clear();
  dp.stats.cached_bytes = 0;
}

void synchronize(int device) {
  ocl::Context& c = ocl::context(device);
  std::lock_guard<std::mutex> lock(c.mu);
  ocl::check(clFinish(c.queue), "clFinish", "synchronize");
}

}  // namespace graft::opencl
