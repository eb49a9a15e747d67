// The kernel interface every device back-end implements: a Backend is a table of function
// pointers, one per kernel of ops/kernel_list.h, plus the argument structs those kernels take.
#pragma once
#include <cstdint>
#include <string>

#include "ops/device.h"
#include "ops/view.h"

namespace graft {

// X-macro lists: name, functor (ops/functors.h).
// The plain unary ops: X(name, Functor, lo, hi, x0, y0). Each becomes the public `Tensor
// name(const Tensor&)` (autograd/functions.h); op-table cases (gradchecks, fast vs reference
// kernels, OpenCL) on inputs in [lo, hi] (lo == hi == 0: a kink at 0, inputs kept away from it);
// and a known value, name(x0) == y0 (y0 from Python's math module), which catches a wrong
// forward that the kernels all share. A new plain op is its functor plus one entry here.
#define GRAFT_PLAIN_UNARY_OPS(X)                    \
  X(neg, Neg, -2, 2, 1.5, -1.5)                     \
  X(exp, Exp, -2, 2, 0.5, 1.6487212707001282)       \
  X(log, Log, 0.2, 3, 2.0, 0.6931471805599453)      \
  X(sqrt, Sqrt, 0.2, 3, 2.0, 1.4142135623730951)    \
  X(rsqrt, Rsqrt, 0.2, 3, 4.0, 0.5)                 \
  X(abs, Abs, 0, 0, -1.25, 1.25)                    \
  X(tanh, Tanh, -2, 2, 0.5, 0.46211715726000974)    \
  X(sigmoid, Sigmoid, -3, 3, 1.0, 0.7310585786300049) \
  X(relu, Relu, 0, 0, -0.5, 0.0)                    \
  X(erf, Erf, -2, 2, 0.5, 0.5204998778130465)       \
  X(sin, Sin, -3, 3, 1.0, 0.8414709848078965)       \
  X(cos, Cos, -3, 3, 1.0, 0.5403023058681398)       \
  X(silu, Silu, -3, 3, 2.0, 1.7615941559557646)
// Every fused unary kernel: the plain ops and those whose public function takes options
// (autograd/ops_elementwise.cpp). X macros over it take (name, Functor, ...).
#define GRAFT_UNARY_OPS(X) \
  GRAFT_PLAIN_UNARY_OPS(X) X(gelu, Gelu) X(gelu_tanh, GeluTanh) X(pow_scalar, PowScalar) \
  X(add_scalar, AddScalar) X(mul_scalar, MulScalar) X(softplus, Softplus)
#define GRAFT_BINARY_OPS(X) \
  X(add, Add) X(sub, Sub) X(mul, Mul) X(div, Div) X(pow, Pow) X(maximum, Maximum) X(minimum, Minimum)
#define GRAFT_COMPARE_OPS(X) X(eq, ==) X(ne, !=) X(lt, <) X(le, <=) X(gt, >) X(ge, >=)

#define GRAFT_ENUM_ENTRY(name, ...) name,
enum class UnaryOp : uint8_t { GRAFT_UNARY_OPS(GRAFT_ENUM_ENTRY) };
enum class BinaryOp : uint8_t { GRAFT_BINARY_OPS(GRAFT_ENUM_ENTRY) };
enum class CompareOp : uint8_t { GRAFT_COMPARE_OPS(GRAFT_ENUM_ENTRY) };
#undef GRAFT_ENUM_ENTRY
enum class ReduceOp : uint8_t { sum, max, min };

const char* unary_name(UnaryOp op);
const char* binary_name(BinaryOp op);
const char* compare_name(CompareOp op);

// Arguments of the fused optimizer steps (ops/cpu/optim.cpp). Scalars stay double here; kernels
// cast them to the parameter's dtype once, as PyTorch does with Python scalars.
struct AdamStepArgs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;          // AdamW: p *= 1 - lr wd; else Adam's L2 term g += wd p
  double bias_correction1 = 1.0;   // 1 - beta1^t
  double bias_correction2 = 1.0;   // 1 - beta2^t
};
struct SgdStepArgs {
  double lr = 1e-3, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = false;  // the momentum buffer is new: buf = d instead of mom buf + (1-damp) d
};
struct AdagradStepArgs {
  double lr = 1e-2;  // already decayed: lr / (1 + (t - 1) lr_decay)
  double eps = 1e-10, weight_decay = 0.0;
};

// Arguments of the fused attention kernels (ops/cpu/attention.cpp).
struct AttentionArgs {
  double scale = 1.0;         // scores = scale * q.k + mask
  bool causal = false;        // key j visible to query i only when j <= i + causal_offset
  int64_t causal_offset = 0;  // 0: top-left aligned (PyTorch's is_causal); S - T: bottom-right
  double dropout_p = 0.0;     // attention dropout; score (n, i, j) kept iff
  uint64_t seed = 0, offset = 0;  //   philox_uniform(seed, offset + (n T + i) S + j) >= p
};

// Arguments of the 1-D convolution kernels (ops/cpu/conv.cpp): x [B, C_in, L], w [C_out,
// C_in/groups, K], out [B, C_out, L_out] with L_out = (L + pad_l + pad_r - dilation (K-1) - 1)
// / stride + 1 (PyTorch's formula; padding may differ on each side).
struct Conv1dArgs {
  int64_t stride = 1, pad_l = 0, pad_r = 0, dilation = 1, groups = 1;
};
// Arguments of the 1-D pooling kernels: windows of `kernel` taps, `dilation` apart (max only),
// every `stride` positions, over x padded by pad_l / pad_r (-inf for max, 0 for avg).
enum class PoolKind : uint8_t { max, avg };
struct Pool1dArgs {
  PoolKind kind = PoolKind::max;
  int64_t kernel = 1, stride = 1, pad_l = 0, pad_r = 0, dilation = 1;
  bool count_include_pad = true;  // avg: divide by `kernel` (true) or by the taps inside x
};

// One function-pointer field per entry of ops/kernel_list.h (the signatures and contracts are
// there). A null field means "this device has no kernel for it": the caller raises a clear
// graft::Error. Back-ends fill their tables with designated initialisers (.fill = ..., in list
// order), so a field they leave out stays null.
struct Backend {
  const char* name = nullptr;
#define GRAFT_KERNEL(k, roles, devices, params) void(*k) params = nullptr;
#include "ops/kernel_list.h"
};

// The table for `device`, or nullptr if no back-end is compiled/available for it.
const Backend* backend_for(Device device);
// The fast CPU kernels: in a portable x86-64 build, the copy (ISA level) this CPU runs best, or
// the one the environment variable GRAFT_CPU_ISA names (baseline, avx2, avx512).
const Backend& cpu_backend();
// That copy's name: "baseline" (x86-64), "avx2" (x86-64-v3), "avx512" (x86-64-v4), or "native"
// in a -Dnative=true / -Dmarch build, which has one copy. Throws graft::Error on a GRAFT_CPU_ISA
// this build lacks or this CPU cannot run.
const char* cpu_isa();
// The copies this build has and this CPU can run, space-separated ("baseline avx2").
std::string cpu_isa_available();
// The scalar reference kernels (simple loops, any strides): tests compare fast kernels to these.
const Backend& cpu_reference_backend();
// Setters of this thread's OpsContext fields (ops/context.h), which hold these modes; scoped
// changes go through graft::ContextGuard (autograd/context.h), which restores them all.
// While enabled, backend_for(cpu) returns the reference kernels: the op-table tests run every op
// through both and compare.
void set_use_reference_kernels(bool on);
bool use_reference_kernels();
// While set (non-null), backend_for(cpu) returns `b` instead: graft::compile
// (autograd/compile_record.cpp) installs a recording table for the duration of a trace.
void set_cpu_backend_override(const Backend* b);
const Backend* cpu_backend_override();
namespace cpu {
// While off, f32 matmul/linear use graft's own kernel instead of oneDNN, whose execute
// allocates on the heap on every call (graft::compile replays with it off).
void set_use_onednn(bool on);
bool use_onednn();
}  // namespace cpu
// Registers a back-end (used by ops/opencl at start-up).
void register_backend(Device::Kind kind, const Backend* backend);

}  // namespace graft
