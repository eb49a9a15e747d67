#include "ops/storage.h"

#include <malloc.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "ops/context.h"
#include "ops/cpu_blocks.h"
#include "ops/error.h"
#include "ops/random.h"

namespace graft {

namespace {

// Blocks of 1 MiB and more come from the cache of mapped blocks in ops/cpu_blocks.cpp. For the
// rest (and for every block with GRAFT_BLOCK_CACHE=0), glibc's mmap threshold would map fresh
// pages for each tensor above it and fault them in on first touch, every step: served from the
// heap instead, their pages are reused from step to step.
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
[[maybe_unused]] const bool g_heap_tuned = [] {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();
#endif

struct DeviceAllocator {
  void* (*alloc)(size_t, Device) = nullptr;
  Storage::Deleter del = nullptr;
};
DeviceAllocator g_opencl_alloc;
Storage::Copier g_opencl_copier = nullptr;

// Bytes held by all live CPU storages of the process. Each tensor alone may fit in memory while
// together they do not (64 layers of 4 GiB each): with memory overcommitted, such a model would
// be built until the kernel's OOM killer ends the process, or another one.
std::atomic<uint64_t> g_live_cpu_bytes{0};

// Physical memory plus swap: what live tensors may take in all.
uint64_t memory_and_swap_bytes() {
  static const uint64_t bytes = [] {
    struct sysinfo si {};
    const uint64_t swap = ::sysinfo(&si) == 0 ? uint64_t(si.totalswap) * si.mem_unit : 0;
    return physical_memory_bytes() + swap;
  }();
  return bytes;
}
}  // namespace

uint64_t live_cpu_bytes() { return g_live_cpu_bytes.load(std::memory_order_relaxed); }

StorageObserver* set_storage_observer(StorageObserver* o) {
  StorageObserver* prev = ops_context().storage_observer;
  ops_context().storage_observer = o;
  return prev;
}

void Storage::set_device_copier(Device::Kind kind, Copier copier) {
  GRAFT_ASSERT(kind == Device::Kind::opencl);
  g_opencl_copier = copier;
}

void Storage::copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                         size_t n) {
  if (n == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  GRAFT_CHECK(g_opencl_copier, "copy from {} to {}: graft was built without OpenCL; hint: use "
              "Device::cpu()", src_device.str(), dst_device.str());
  g_opencl_copier(dst, dst_device, src, src_device, n);
}

void Storage::set_device_allocator(Device::Kind kind, void* (*alloc)(size_t, Device), Deleter del) {
  GRAFT_ASSERT(kind == Device::Kind::opencl);
  g_opencl_alloc = {alloc, del};
}

uint64_t physical_memory_bytes() {
  static const uint64_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : uint64_t(0);
  }();
  return bytes;
}

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  allocate(nullptr, DType::f32);
}

// numel() has checked the shape, so the byte count cannot overflow (at most 2^62).
Storage::Storage(const Shape& shape, DType dtype, Device device)
    : nbytes_(size_t(shape.numel()) * dtype_size(dtype)), device_(device) {
  allocate(&shape, dtype);
}

void Storage::allocate(const Shape* shape, DType dtype) {
  // "cannot allocate 37.3 GiB for a float32 tensor of shape [100000, 100000]: <why>"
  auto refuse = [&](const std::string& why) {
    const std::string what =
        shape ? fmt::format("a {} tensor of shape {}", dtype_name(dtype), shape->str())
              : fmt::format("a buffer of {} bytes", nbytes_);
    return Error(fmt::format("cannot allocate {} for {} on {}: {}", format_bytes(double(nbytes_)),
                             what, device_.str(), why));
  };
  const uint64_t phys = physical_memory_bytes();
  if (device_.is_cpu()) {
    if (phys > 0 && nbytes_ > phys)
      throw refuse(fmt::format("this machine has {} of memory; hint: use smaller sizes (batch, "
                               "hidden width, vocabulary, sequence length)",
                               format_bytes(double(phys))));
    const uint64_t limit = memory_and_swap_bytes();
    const uint64_t held = g_live_cpu_bytes.fetch_add(nbytes_, std::memory_order_relaxed);
    if (phys > 0 && held + nbytes_ > limit) {
      g_live_cpu_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
      throw refuse(fmt::format("graft's tensors already hold {} and this machine has {} of memory "
                               "(swap included); hint: use smaller sizes (batch, hidden width, "
                               "layers, vocabulary, sequence length)",
                               format_bytes(double(held)), format_bytes(double(limit))));
    }
    try {
      data_ = detail::cpu_alloc(nbytes_ ? nbytes_ : 1);
    } catch (const std::bad_alloc&) {
      g_live_cpu_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
      throw refuse(fmt::format("out of memory (this machine has {}, {} of it free now); hint: "
                               "use smaller sizes or free memory",
                               format_bytes(double(phys)),
                               format_bytes(double(::sysconf(_SC_AVPHYS_PAGES)) *
                                            double(::sysconf(_SC_PAGE_SIZE)))));
    }
    if (StorageObserver* o = ops_context().storage_observer) o->on_create(*this);
  } else {
    GRAFT_CHECK(g_opencl_alloc.alloc, "cannot allocate on {}: graft was built without OpenCL or "
                "no OpenCL device is available; hint: use Device::cpu()", device_.str());
    try {
      data_ = g_opencl_alloc.alloc(nbytes_, device_);
    } catch (const std::bad_alloc&) {
      throw refuse("out of host memory for the device buffer's bookkeeping");
    }
  }
}

Storage::~Storage() {
  if (device_.is_cpu()) {
    if (StorageObserver* o = ops_context().storage_observer) o->on_destroy(*this);
    detail::cpu_free(data_, nbytes_ ? nbytes_ : 1);
    g_live_cpu_bytes.fetch_sub(nbytes_, std::memory_order_relaxed);
  }
  else if (g_opencl_alloc.del)
    g_opencl_alloc.del(data_, device_);
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "opencl") return opencl(0);
  if (s.rfind("opencl:", 0) == 0) {
    std::string n = s.substr(7);
    bool digits = !n.empty() && n.size() < 6 && n.find_first_not_of("0123456789") == std::string::npos;
    if (digits) return opencl(std::stoi(n));
  }
  throw Error(fmt::format("unknown device '{}'; expected cpu, opencl or opencl:N", s));
}

Generator& default_generator() {
  static Generator g;
  return g;
}
void manual_seed(uint64_t seed) { default_generator() = Generator(seed); }

}  // namespace graft
