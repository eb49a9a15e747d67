// Assembles the CPU back-end tables (fast and reference) and the device -> back-end registry.
#include "ops/cpu/cpu_kernels.h"
#include "ops/context.h"

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
}  // namespace
void set_cpu_backend_override(const Backend* b) { ops_context().cpu_override = b; }
const Backend* cpu_backend_override() { return ops_context().cpu_override; }
void set_use_reference_kernels(bool on) { ops_context().reference_kernels = on; }
bool use_reference_kernels() { return ops_context().reference_kernels; }
void register_backend(Device::Kind kind, const Backend* backend) {
  GRAFT_ASSERT(kind == Device::Kind::opencl);
  g_opencl = backend;
}
const Backend* backend_for(Device device) {
  if (device.is_cpu()) {
    const OpsContext& c = ops_context();
    if (c.cpu_override) return c.cpu_override;
    return c.reference_kernels ? &cpu_reference_backend() : &cpu_backend();
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
