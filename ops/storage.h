// Storage: a reference-counted, 64-byte-aligned buffer on one device, plus a version counter
// that in-place writes bump (autograd uses it to detect a saved tensor that was modified).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/shape.h"

namespace graft {

class Storage {
 public:
  // Allocates nbytes (uninitialised) on `device`. CPU memory is 64-byte aligned. A request
  // larger than the machine's physical memory, or one that would take the process's live
  // storages past physical memory plus swap (live_cpu_bytes), is refused before anything is
  // allocated, and an allocator that runs out of memory (std::bad_alloc, a null pointer) is
  // reported the same way: graft::Error saying how much memory was asked for and how much the
  // machine has.
  Storage(size_t nbytes, Device device);
  // The same for a contiguous tensor: the error names its dtype and shape ("cannot allocate
  // 37.3 GiB for a float32 tensor of shape [100000, 100000]: ..."). graft::Error from
  // Shape::numel for a negative or overflowing shape.
  Storage(const Shape& shape, DType dtype, Device device);
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
  // Copies n bytes between any two devices (dst/src are data() pointers plus byte offsets).
  using Copier = void (*)(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t n);
  static void set_device_copier(Device::Kind kind, Copier copier);
  static void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                         size_t n);

 private:
  void allocate(const Shape* shape, DType dtype);
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint32_t version_ = 0;
};

using StoragePtr = std::shared_ptr<Storage>;

// This machine's physical memory in bytes (sysconf; 0 when unknown), and a byte count for
// people: "512 B", "1.5 KiB", "37.3 GiB".
uint64_t physical_memory_bytes();
// Bytes held by the live CPU storages of this process. A new CPU storage is refused when these
// and it together would exceed physical memory plus swap.
uint64_t live_cpu_bytes();
std::string format_bytes(double bytes);

// Told about every CPU storage created or destroyed on this thread while installed (per thread;
// graft::compile uses it to tell buffers made during a trace from older ones, and benchmarks to
// measure live bytes). Callbacks must not throw.
struct StorageObserver {
  virtual void on_create(const Storage& s) = 0;
  virtual void on_destroy(const Storage& s) = 0;
  virtual ~StorageObserver() = default;
};
// Installs `o` (nullptr: none) for this thread; returns the previous one.
StorageObserver* set_storage_observer(StorageObserver* o);

}  // namespace graft
