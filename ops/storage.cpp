#include "ops/storage.h"

#include <cstdlib>
#include <new>

#include "ops/error.h"
#include "ops/random.h"

namespace graft {

namespace {
struct DeviceAllocator {
  void* (*alloc)(size_t, Device) = nullptr;
  Storage::Deleter del = nullptr;
};
DeviceAllocator g_opencl_alloc;
}  // namespace

void Storage::set_device_allocator(Device::Kind kind, void* (*alloc)(size_t, Device), Deleter del) {
  GRAFT_ASSERT(kind == Device::Kind::opencl);
  g_opencl_alloc = {alloc, del};
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cpu()) {
    size_t n = (nbytes + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, n ? n : 64);
    if (!data_) throw std::bad_alloc();
  } else {
    GRAFT_CHECK(g_opencl_alloc.alloc, "cannot allocate on {}: graft was built without OpenCL or "
                "no OpenCL device is available; hint: use Device::cpu()", device.str());
    data_ = g_opencl_alloc.alloc(nbytes, device);
  }
}

Storage::~Storage() {
  if (device_.is_cpu())
    std::free(data_);
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
