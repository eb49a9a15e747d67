// Storage: a reference-counted, 64-byte-aligned buffer on one device, plus a version counter
// that in-place writes bump (autograd uses it to detect a saved tensor that was modified).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ops/device.h"

namespace graft {

class Storage {
 public:
  // Allocates nbytes (uninitialised) on `device`. CPU memory is 64-byte aligned.
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint32_t version() const { return version_; }
  void bump_version() { ++version_; }

  // Hook for device back-ends (OpenCL): free function for non-CPU memory.
  using Deleter = void (*)(void* data, Device device);
  static void set_device_allocator(Device::Kind kind, void* (*alloc)(size_t, Device), Deleter del);

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint32_t version_ = 0;
};

using StoragePtr = std::shared_ptr<Storage>;

}  // namespace graft
