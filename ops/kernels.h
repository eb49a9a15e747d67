// The kernel interface every device back-end implements. A Backend is a table of function
// pointers; a null entry means "this device has no kernel for it" (the caller raises a clear
// graft::Error). Kernels never allocate outputs: the caller passes every output view, already
// sized; outputs start uninitialised and kernels write (never accumulate) them unless the name
// says `_add`. Shapes use B batch, T/S lengths, C channels, V vocab.
#pragma once
#include <cstdint>

#include "ops/device.h"
#include "ops/view.h"

namespace graft {

// X-macro lists: name, functor (ops/functors.h).
#define GRAFT_UNARY_OPS(X) \
  X(neg, Neg) X(exp, Exp) X(log, Log) X(sqrt, Sqrt) X(rsqrt, Rsqrt) X(abs, Abs) X(tanh, Tanh) \
  X(sigmoid, Sigmoid) X(relu, Relu) X(gelu, Gelu) X(gelu_tanh, GeluTanh) X(erf, Erf) X(sin, Sin) \
  X(cos, Cos) X(pow_scalar, PowScalar) X(add_scalar, AddScalar) X(mul_scalar, MulScalar)
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

struct Backend {
  const char* name;
  // ---- memory
  // dst[i] = value (cast to dst.dtype); dst may be strided.
  void (*fill)(const TensorView& dst, double value);
  // dst[i] = cast(src[i]); src is already broadcast to dst.shape; both may be strided.
  void (*copy)(const TensorView& dst, const TensorView& src);
  // ---- elementwise (float dtypes); `out`/`dx` are contiguous, inputs any strides.
  void (*unary)(UnaryOp op, double alpha, const TensorView& x, const TensorView& out);
  // dx = df(x, y, dy) elementwise (same shapes)
  void (*unary_backward)(UnaryOp op, double alpha, const TensorView& x, const TensorView& y,
                         const TensorView& dy, const TensorView& dx);
  // a and b are already broadcast to out.shape (stride 0 on broadcast dims).
  void (*binary)(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out);
  // out (bool) = a <op> b, a/b broadcast to out.shape, any dtype (same for a and b).
  void (*compare)(CompareOp op, const TensorView& a, const TensorView& b, const TensorView& out);
  // out = cond ? a : b; all broadcast to out.shape; cond is bool.
  void (*where)(const TensorView& cond, const TensorView& a, const TensorView& b,
                const TensorView& out);
  // ---- reductions: out has x's rank with reduced dims of size 1 (keepdim form, contiguous).
  void (*reduce)(ReduceOp op, const TensorView& x, const TensorView& out);
  // ---- linear algebra
  // out[..., M, N] = a[..., M, K] @ b[..., K, N]; a, b broadcast to out's batch dims; any strides.
  void (*matmul)(const TensorView& a, const TensorView& b, const TensorView& out);
  // out[N, O] = x[N, I] @ w[O, I]^T + bias[O] (bias may have data == nullptr for none).
  void (*linear)(const TensorView& x, const TensorView& w, const TensorView& bias,
                 const TensorView& out);
  // ---- normalisation (x contiguous, `dim` is the last dim)
  // y = softmax(x) or log_softmax(x) over the last dim.
  void (*softmax)(const TensorView& x, const TensorView& y, bool log);
  // dx = y * (dy - sum(dy * y)) for softmax; dx = dy - exp(y) * sum(dy) for log_softmax.
  void (*softmax_backward)(const TensorView& y, const TensorView& dy, const TensorView& dx,
                           bool log);
  // Layer norm over the last dim of x [N, C]: y = (x - mean) * rstd * gamma + beta.
  // mean and rstd [N] are outputs saved for backward; gamma/beta [C] may be null (data).
  void (*layer_norm)(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                     double eps, const TensorView& y, const TensorView& mean,
                     const TensorView& rstd);
  // dx, dgamma, dbeta (dgamma/dbeta may be null) for layer_norm.
  void (*layer_norm_backward)(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                              const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                              const TensorView& dgamma, const TensorView& dbeta);
  // ---- indexing (index is int64; bounds checked by the caller)
  // out = src.index_select(dim, index): out.shape = src.shape with dim -> index.numel()
  void (*index_select)(const TensorView& src, int dim, const TensorView& index,
                       const TensorView& out);
  // dst.index_add_(dim, index, src): dst[.., index[i], ..] += src[.., i, ..]
  void (*index_add)(const TensorView& dst, int dim, const TensorView& index, const TensorView& src);
  // out[i][j] = src[i][index[i][j]] along dim (torch.gather); index.shape == out.shape
  void (*gather)(const TensorView& src, int dim, const TensorView& index, const TensorView& out);
  // dst[i][index[i][j]] += src[i][j] along dim (torch.scatter_add_)
  void (*scatter_add)(const TensorView& dst, int dim, const TensorView& index,
                      const TensorView& src);
  // ---- losses
  // Cross-entropy over logits [N, V] with targets [N] (int64). Writes per-row loss [N]
  // (0 where target == ignore_index) and the log-softmax [N, V] saved for backward.
  // loss_n = -(1 - ls) * logp[n, t] - ls/V * sum_v logp[n, v]
  void (*cross_entropy)(const TensorView& logits, const TensorView& target, int64_t ignore_index,
                        double label_smoothing, const TensorView& loss, const TensorView& logp);
  // dlogits[n] = dloss[n] * (softmax(n) - (1 - ls) onehot(t) - ls/V), 0 for ignored rows.
  void (*cross_entropy_backward)(const TensorView& logp, const TensorView& target,
                                 int64_t ignore_index, double label_smoothing,
                                 const TensorView& dloss, const TensorView& dlogits);
  // ---- random (counter-based Philox: element i depends only on (seed, offset + i))
  // out ~ U[0, 1) (float) ; normal: N(0, 1)
  void (*uniform)(const TensorView& out, uint64_t seed, uint64_t offset);
  void (*normal)(const TensorView& out, uint64_t seed, uint64_t offset);
  // ---- optimizers: one fused in-place pass; every view contiguous, same dtype and numel.
  // Adam/AdamW: updates param, m (exp_avg) and v (exp_avg_sq) from grad.
  void (*adam_step)(const TensorView& param, const TensorView& grad, const TensorView& m,
                    const TensorView& v, const AdamStepArgs& a);
  // SGD: updates param and the momentum buffer `buf` (unused, may be null, if momentum == 0).
  void (*sgd_step)(const TensorView& param, const TensorView& grad, const TensorView& buf,
                   const SgdStepArgs& a);
  // Adagrad: updates param and the sum of squared gradients.
  void (*adagrad_step)(const TensorView& param, const TensorView& grad, const TensorView& sum,
                       const AdagradStepArgs& a);
  // ---- fused attention: q [B,H,T,D], k [B,H,S,D], v [B,H,S,E] contiguous, mask an additive
  // [B,H,T,S] view with broadcast strides (data null: none). out [B,H,T,E], lse [B,H,T]
  // (logsumexp of each score row; +inf for a row with every key masked, whose out is 0).
  void (*attention)(const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& mask, const AttentionArgs& a, const TensorView& out,
                    const TensorView& lse);
  // dq, dk, dv (written, contiguous) from dout, recomputing the probabilities from lse.
  void (*attention_backward)(const TensorView& q, const TensorView& k, const TensorView& v,
                             const TensorView& mask, const AttentionArgs& a,
                             const TensorView& out, const TensorView& lse,
                             const TensorView& dout, const TensorView& dq, const TensorView& dk,
                             const TensorView& dv);
  // ---- 1-D convolution and pooling (ops/cpu/conv.cpp); inputs any strides, outputs contiguous.
  // out[b, o, t] = bias[o] + sum_{i, k} w[o, i, k] x[b, g C_in/G + i, t stride - pad_l + k dil]
  // (g = the group of o; taps outside x read 0; bias data null: none).
  void (*conv1d)(const TensorView& x, const TensorView& w, const TensorView& bias,
                 const Conv1dArgs& a, const TensorView& out);
  // dx [B, C_in, L] = the transpose of conv1d applied to dy (written, not accumulated).
  void (*conv1d_backward_input)(const TensorView& dy, const TensorView& w, const Conv1dArgs& a,
                                const TensorView& dx);
  // dw [C_out, C_in/G, K] = sum_{b, t} dy x-taps; dbias [C_out] = sum_{b, t} dy (data null: skip).
  void (*conv1d_backward_weight)(const TensorView& x, const TensorView& dy, const Conv1dArgs& a,
                                 const TensorView& dw, const TensorView& dbias);
  // out [B, C, L_out] = max or mean of each window of x [B, C, L]; for max, indices (int64,
  // same shape) get the position in [0, L) of each maximum (the first one on ties).
  void (*pool1d)(const TensorView& x, const Pool1dArgs& a, const TensorView& out,
                 const TensorView& indices);
  // dx [B, C, L] (written): max: dx[idx] += dy; avg: each dy spread evenly over its window.
  void (*pool1d_backward)(const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,
                          const TensorView& dx);
};

// The table for `device`, or nullptr if no back-end is compiled/available for it.
const Backend* backend_for(Device device);
const Backend& cpu_backend();
// The scalar reference kernels (simple loops, any strides): tests compare fast kernels to these.
const Backend& cpu_reference_backend();
// While enabled (per thread), backend_for(cpu) returns the reference kernels: the op-table tests
// run every op through both and compare.
void set_use_reference_kernels(bool on);
bool use_reference_kernels();
// While set (per thread, non-null), backend_for(cpu) returns `b` instead: graft::compile
// (autograd/compile.cpp) installs a recording table for the duration of a trace.
void set_cpu_backend_override(const Backend* b);
const Backend* cpu_backend_override();
namespace cpu {
// While off (per thread), f32 matmul/linear use graft's own kernel instead of oneDNN, whose
// execute allocates on the heap on every call (graft::compile replays with it off).
void set_use_onednn(bool on);
bool use_onednn();
// While on (per thread), f32 matmul/linear round both operands to bfloat16 and multiply them with
// oneDNN's bf16 primitive (f32 accumulation, f32 output and bias). Tiny products (< 2^15
// multiply-adds), K == 0 and use_onednn() off stay f32. graft::AutocastGuard sets it.
void set_matmul_bf16(bool on);
bool matmul_bf16();
}  // namespace cpu
// Registers a back-end (used by ops/opencl at start-up).
void register_backend(Device::Kind kind, const Backend* backend);

}  // namespace graft
