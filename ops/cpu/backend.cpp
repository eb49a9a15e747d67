// Assembles the CPU back-end tables (fast and reference) and the device -> back-end registry.
#include "ops/cpu/cpu_kernels.h"

namespace graft {

// Both tables come from the kernel list: every kernel must exist in both namespaces (a missing
// one is an undefined reference at link time).
const Backend& cpu_backend() {
  static const Backend b{
      .name = "cpu",
#define GRAFT_KERNEL(k, roles, devices, params) .k = cpu::k,
#include "ops/kernel_list.h"
  };
  return b;
}
const Backend& cpu_reference_backend() {
  static const Backend b{
      .name = "cpu::ref",
#define GRAFT_KERNEL(k, roles, devices, params) .k = cpu::ref::k,
#include "ops/kernel_list.h"
  };
  return b;
}

namespace {
const Backend* g_opencl = nullptr;
thread_local bool t_reference __attribute__((tls_model("initial-exec"))) = false;
thread_local const Backend* t_override __attribute__((tls_model("initial-exec"))) = nullptr;
}  // namespace
void set_cpu_backend_override(const Backend* b) { t_override = b; }
const Backend* cpu_backend_override() { return t_override; }
void set_use_reference_kernels(bool on) { t_reference = on; }
bool use_reference_kernels() { return t_reference; }
void register_backend(Device::Kind kind, const Backend* backend) {
  GRAFT_ASSERT(kind == Device::Kind::opencl);
  g_opencl = backend;
}
const Backend* backend_for(Device device) {
  if (device.is_cpu()) {
    if (t_override) return t_override;
    return t_reference ? &cpu_reference_backend() : &cpu_backend();
  }
  return g_opencl;
}

#define GRAFT_NAME_CASE(name, ...) \
  case decltype(op)::name: return #name;
const char* unary_name(UnaryOp op) {
  switch (op) { GRAFT_UNARY_OPS(GRAFT_NAME_CASE) }
  return "?";
}
const char* binary_name(BinaryOp op) {
  switch (op) { GRAFT_BINARY_OPS(GRAFT_NAME_CASE) }
  return "?";
}
const char* compare_name(CompareOp op) {
  switch (op) { GRAFT_COMPARE_OPS(GRAFT_NAME_CASE) }
  return "?";
}

}  // namespace graft
