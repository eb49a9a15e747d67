// The opt-in CPU fallback (GRAFT_OPENCL_FALLBACK=1 or opencl::set_cpu_fallback(true)): every
// kernel of ops/kernel_list.h the OpenCL table leaves null is filled with a wrapper that copies
// each device view it is given to the host (the span of its elements, strides kept), runs the
// CPU kernel there, and writes back each view whose bytes the kernel changed (the outputs;
// aliasing inputs stay untouched). The first call of each op prints one warning to stderr.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/error.h"
#include "ops/opencl/backend_nn.h"
#include "ops/opencl/opencl.h"
#include "ops/opencl/runtime.h"

namespace graft::ocl {
namespace {

std::atomic<uint64_t> g_calls{0};

void warn_once(const char* op) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (!seen.insert(op).second) return;
  std::fprintf(stderr,
               "graft: warning: no OpenCL kernel for '%s'; running it on the CPU (CPU fallback "
               "enabled; data is copied to the host and back on every call)\n",
               op);
}

// Host copies of the device views of one call.
class Staging {
 public:
  // The host twin of v (v itself if it is not on a device).
  TensorView stage(const TensorView& v) {
    if (!v.data || v.device.is_cpu()) return v;
    int64_t hi = 0;  // the last element's offset: the span is [0, hi]
    for (int d = 0; d < v.rank(); ++d) {
      if (v.shape[d] == 0) return empty_twin(v);
      GRAFT_CHECK(v.strides[d] >= 0 || v.shape[d] == 1,
                  "CPU fallback: negative strides are not supported (shape {}, strides {})",
                  v.shape, v.strides);
      if (v.shape[d] > 1) hi += (v.shape[d] - 1) * v.strides[d];
    }
    auto it = std::make_unique<Item>();
    it->dev = v;
    const size_t bytes = size_t(hi + 1) * dtype_size(v.dtype);
    it->host.resize(bytes);
    copy_bytes(it->host.data(), Device::cpu(), v.data, v.device, bytes);
    it->before = it->host;
    TensorView h = v;
    h.data = it->host.data();
    h.device = Device::cpu();
    items_.push_back(std::move(it));
    return h;
  }
  // Writes back every staged view whose bytes changed.
  void commit() {
    for (const auto& it : items_)
      if (std::memcmp(it->host.data(), it->before.data(), it->host.size()) != 0)
        copy_bytes(it->dev.data, it->dev.device, it->host.data(), Device::cpu(), it->host.size());
  }

 private:
  struct Item {
    TensorView dev;
    std::vector<char> host, before;
  };
  TensorView empty_twin(const TensorView& v) {
    TensorView h = v;
    h.data = &dummy_;  // no element is read or written
    h.device = Device::cpu();
    return h;
  }
  std::vector<std::unique_ptr<Item>> items_;
  double dummy_ = 0;
};

template <class A> decltype(auto) host_arg(Staging& s, const A& a) {
  if constexpr (std::is_same_v<A, TensorView>) return s.stage(a);
  else return (a);
}

// One wrapper per Backend field M: stage, run the CPU kernel, commit.
template <auto M, class F> struct Fallback;
template <auto M, class... A> struct Fallback<M, void (*)(A...)> {
  static inline const char* name = "?";
  static void run(A... a) {
    warn_once(name);
    ++g_calls;
    Staging s;
    const Backend& cpu = cpu_backend();
    (cpu.*M)(host_arg(s, a)...);
    s.commit();
  }
};

template <auto M> void fill_in(Backend& b, const Backend& base, const char* name) {
  if (b.*M != nullptr) return;
  using F = std::remove_cvref_t<decltype(base.*M)>;
  Fallback<M, F>::name = name;
  b.*M = &Fallback<M, F>::run;
}

}  // namespace

Backend with_cpu_fallback(const Backend& base) {
  Backend b = base;
#define GRAFT_KERNEL(k, roles, devices, params) fill_in<&Backend::k>(b, base, #k);
#include "ops/kernel_list.h"
  return b;
}

uint64_t fallback_calls() { return g_calls.load(); }

}  // namespace graft::ocl
