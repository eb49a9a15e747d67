// Assembles the CPU back-end tables (fast and reference) and the device -> back-end registry.
#include "ops/cpu/cpu_kernels.h"
#include "ops/context.h"
#include "graft_config.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace graft {

#if GRAFT_CPU_DISPATCH
// The ISA copies' kernels (the same files compiled with -DGRAFT_KERNEL_ISA, see
// ops/cpu/cpu_kernels.h); declared here, since only this file names them.
namespace cpu::avx2 {
#define GRAFT_KERNEL(k, roles, devices, params) void k params;
#include "ops/kernel_list.h"
}  // namespace cpu::avx2
namespace cpu::avx512 {
#define GRAFT_KERNEL(k, roles, devices, params) void k params;
#include "ops/kernel_list.h"
}  // namespace cpu::avx512
#endif

namespace {

// The tables, each from the kernel list (ops/cpu/backend_table.inc).
#define GRAFT_TABLE_VAR kBaseline
#define GRAFT_TABLE_NAME "cpu"
#define GRAFT_TABLE_NS cpu
#include "ops/cpu/backend_table.inc"
#define GRAFT_TABLE_VAR kReference
#define GRAFT_TABLE_NAME "cpu::ref"
#define GRAFT_TABLE_NS cpu::ref
#include "ops/cpu/backend_table.inc"

struct IsaCopy {
  const char* name;
  const Backend* table;
  bool supported;  // this CPU (and its OS) can run it
};

#if GRAFT_CPU_DISPATCH
#define GRAFT_TABLE_VAR kAvx2
#define GRAFT_TABLE_NAME "cpu"
#define GRAFT_TABLE_NS cpu::avx2
#include "ops/cpu/backend_table.inc"
#define GRAFT_TABLE_VAR kAvx512
#define GRAFT_TABLE_NAME "cpu"
#define GRAFT_TABLE_NS cpu::avx512
#include "ops/cpu/backend_table.inc"

// Can this CPU run x86-64-v3 / x86-64-v4 code (the -march of each copy)? libgcc's checks include
// the OS's saving of the YMM/ZMM state (XCR0). Clang 14 knows no level names, so the features.
bool has_v3() {
  __builtin_cpu_init();
#if defined(__clang__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
         __builtin_cpu_supports("f16c");
#else
  return __builtin_cpu_supports("x86-64-v3");
#endif
}
bool has_v4() {
#if defined(__clang__)
  return has_v3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4");
#endif
}
// Best last.
const std::vector<IsaCopy>& isa_copies() {
  static const std::vector<IsaCopy> v{
      {"baseline", &kBaseline, true}, {"avx2", &kAvx2, has_v3()}, {"avx512", &kAvx512, has_v4()}};
  return v;
}
#else
// -Dnative=true or -Dmarch=...: one copy, compiled for the machine the flags name.
const std::vector<IsaCopy>& isa_copies() {
  static const std::vector<IsaCopy> v{{"native", &kBaseline, true}};
  return v;
}
#endif

// The copy cpu_backend() runs: GRAFT_CPU_ISA's, else the best this CPU supports.
const IsaCopy& chosen_copy() {
  static const IsaCopy& c = []() -> const IsaCopy& {
    const auto& v = isa_copies();
    const char* want = std::getenv("GRAFT_CPU_ISA");
    if (!want || !*want) {
      for (size_t i = v.size(); i-- > 0;)
        if (v[i].supported) return v[i];
    }
    for (const IsaCopy& k : v)
      if (k.name == std::string_view(want)) {
        GRAFT_CHECK(k.supported, "GRAFT_CPU_ISA={}: this CPU cannot run it (it can: {})", want,
                    cpu_isa_available());
        return k;
      }
    throw Error(fmt::format("GRAFT_CPU_ISA={}: not a CPU kernel copy of this build (it has: {})",
                            want, cpu_isa_available()));
  }();
  return c;
}

}  // namespace

const Backend& cpu_backend() { return *chosen_copy().table; }
const Backend& cpu_reference_backend() { return kReference; }
const char* cpu_isa() { return chosen_copy().name; }
std::string cpu_isa_available() {
  std::string s;
  for (const IsaCopy& c : isa_copies())
    if (c.supported) {
      if (!s.empty()) s += ' ';
      s += c.name;
    }
  return s;
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
