// The kernel list: every kernel a device back-end can implement, written once. Everything else
// that names the kernels is generated from this list:
//
//   graft::Backend (ops/kernels.h)           one function-pointer field per kernel
//   graft::cpu and graft::cpu::ref           a declaration of each fast and reference kernel
//     (ops/cpu/cpu_kernels.h)                  (a kernel left undefined fails to link)
//   the two CPU tables (ops/cpu/backend.cpp)  .k = cpu::k and .k = cpu::ref::k for every kernel
//   the OpenCL table (ops/opencl/backend.cpp) .k = ocl::k for the kernels marked cpu_opencl
//   the OpenCL CPU fallback (fallback.cpp)   a host wrapper for every entry the table leaves null
//   graft::trace::Kernel (autograd/compile.h) the kernels graft::compile records and replays
//
// One entry reads   GRAFT_KERNEL(name, roles, devices, (parameters))
//   name        the Backend field, and the function name in every back-end's namespace
//   roles       the role of each TensorView parameter, in order: R read, W written (the kernel
//               overwrites every element), M read and written (updated in place). graft::compile
//               uses them to track buffers; a static_assert checks one letter per TensorView.
//   devices     cpu_opencl: the OpenCL back-end has it (a function of this name and signature
//               in ops/opencl; compile error without one); cpu: CPU only (an OpenCL tensor gets
//               a clear "no kernel" error, or runs on the host under the CPU fallback).
//   parameters  the signature; every kernel returns void.
//
// Contracts shared by all kernels: kernels never allocate outputs: the caller passes every
// output view, already sized; outputs start uninitialised and kernels write (never accumulate)
// them unless the name says `_add`. Shapes use B batch, T/S lengths, C channels, V vocab.
//
// Adding a kernel: one entry here, then cpu::name and cpu::ref::name in an ops/cpu/*.cpp file
// (tests/ops compare the two), and ocl::name if it is marked cpu_opencl.
//
// Usage (an "X-macro" include): define GRAFT_KERNEL(name, roles, devices, params), include this
// file; it expands the macro once per kernel and undefines it. No include guard, by design.

#ifndef GRAFT_KERNEL
#error "define GRAFT_KERNEL(name, roles, devices, params) before including ops/kernel_list.h"
#endif

// ---- memory
// dst[i] = value (cast to dst.dtype); dst may be strided.
GRAFT_KERNEL(fill, "W", cpu_opencl, (const TensorView& dst, double value))
// dst[i] = cast(src[i]); src is already broadcast to dst.shape; both may be strided.
GRAFT_KERNEL(copy, "WR", cpu_opencl, (const TensorView& dst, const TensorView& src))

// ---- elementwise (float dtypes); `out`/`dx` are contiguous, inputs any strides.
// out = f(x) for the functor of `op` (ops/functors.h); alpha is its scalar (pow_scalar, ...).
GRAFT_KERNEL(unary, "RW", cpu_opencl,
             (UnaryOp op, double alpha, const TensorView& x, const TensorView& out))
// dx = df(x, y, dy) elementwise (same shapes)
GRAFT_KERNEL(unary_backward, "RRRW", cpu_opencl,
             (UnaryOp op, double alpha, const TensorView& x, const TensorView& y,
              const TensorView& dy, const TensorView& dx))
// out = a <op> b; a and b are already broadcast to out.shape (stride 0 on broadcast dims).
GRAFT_KERNEL(binary, "RRW", cpu_opencl,
             (BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out))
// out (bool) = a <op> b, a/b broadcast to out.shape, any dtype (same for a and b).
GRAFT_KERNEL(compare, "RRW", cpu_opencl,
             (CompareOp op, const TensorView& a, const TensorView& b, const TensorView& out))
// out = cond ? a : b; all broadcast to out.shape; cond is bool.
GRAFT_KERNEL(where, "RRRW", cpu_opencl,
             (const TensorView& cond, const TensorView& a, const TensorView& b,
              const TensorView& out))

// ---- reductions: out has x's rank with reduced dims of size 1 (keepdim form, contiguous).
GRAFT_KERNEL(reduce, "RW", cpu_opencl, (ReduceOp op, const TensorView& x, const TensorView& out))
// out (x's shape) = the running sum of x along dim: out_i = sum_{j <= i} x_j, or sum_{j >= i}
// when reverse (the backward of cumsum is the reverse cumsum of the gradient).
GRAFT_KERNEL(cumsum, "RW", cpu_opencl,
             (const TensorView& x, int dim, bool reverse, const TensorView& out))

// ---- linear algebra
// out[..., M, N] = a[..., M, K] @ b[..., K, N]; a, b broadcast to out's batch dims; any strides.
// prec bf16 (f32 only, chosen by autocast): a and b rounded to bfloat16, f32 accumulation.
GRAFT_KERNEL(matmul, "RRW", cpu_opencl,
             (const TensorView& a, const TensorView& b, const TensorView& out, Precision prec))
// out[N, O] = x[N, I] @ w[O, I]^T + bias[O] (bias may have data == nullptr for none); prec as
// for matmul (the bias stays f32).
GRAFT_KERNEL(linear, "RRRW", cpu_opencl,
             (const TensorView& x, const TensorView& w, const TensorView& bias,
              const TensorView& out, Precision prec))

// ---- normalisation (x contiguous, `dim` is the last dim)
// y = softmax(x) or log_softmax(x) over the last dim.
GRAFT_KERNEL(softmax, "RW", cpu_opencl, (const TensorView& x, const TensorView& y, bool log))
// dx = y * (dy - sum(dy * y)) for softmax; dx = dy - exp(y) * sum(dy) for log_softmax.
GRAFT_KERNEL(softmax_backward, "RRW", cpu_opencl,
             (const TensorView& y, const TensorView& dy, const TensorView& dx, bool log))
// Layer norm over the last dim of x [N, C]: y = (x - mean) * rstd * gamma + beta.
// mean and rstd [N] are outputs saved for backward; gamma/beta [C] may be null (data).
GRAFT_KERNEL(layer_norm, "RRRWWW", cpu_opencl,
             (const TensorView& x, const TensorView& gamma, const TensorView& beta, double eps,
              const TensorView& y, const TensorView& mean, const TensorView& rstd))
// dx, dgamma, dbeta (dgamma/dbeta may be null) for layer_norm.
GRAFT_KERNEL(layer_norm_backward, "RRRRRWWW", cpu_opencl,
             (const TensorView& x, const TensorView& gamma, const TensorView& mean,
              const TensorView& rstd, const TensorView& dy, const TensorView& dx,
              const TensorView& dgamma, const TensorView& dbeta))

// ---- indexing (index is int64; bounds checked by the caller)
// out = src.index_select(dim, index): out.shape = src.shape with dim -> index.numel()
GRAFT_KERNEL(index_select, "RRW", cpu_opencl,
             (const TensorView& src, int dim, const TensorView& index, const TensorView& out))
// dst.index_add_(dim, index, src): dst[.., index[i], ..] += src[.., i, ..]
GRAFT_KERNEL(index_add, "MRR", cpu_opencl,
             (const TensorView& dst, int dim, const TensorView& index, const TensorView& src))
// out[i][j] = src[i][index[i][j]] along dim (torch.gather); index.shape == out.shape
GRAFT_KERNEL(gather, "RRW", cpu_opencl,
             (const TensorView& src, int dim, const TensorView& index, const TensorView& out))
// dst[i][index[i][j]] += src[i][j] along dim (torch.scatter_add_)
GRAFT_KERNEL(scatter_add, "MRR", cpu_opencl,
             (const TensorView& dst, int dim, const TensorView& index, const TensorView& src))

// ---- losses
// Cross-entropy over logits [N, V] with targets [N] (int64). Writes per-row loss [N]
// (0 where target == ignore_index) and the log-softmax [N, V] saved for backward.
// loss_n = -(1 - ls) * logp[n, t] - ls/V * sum_v logp[n, v]
GRAFT_KERNEL(cross_entropy, "RRWW", cpu_opencl,
             (const TensorView& logits, const TensorView& target, int64_t ignore_index,
              double label_smoothing, const TensorView& loss, const TensorView& logp))
// dlogits[n] = dloss[n] * (softmax(n) - (1 - ls) onehot(t) - ls/V), 0 for ignored rows.
GRAFT_KERNEL(cross_entropy_backward, "RRRW", cpu_opencl,
             (const TensorView& logp, const TensorView& target, int64_t ignore_index,
              double label_smoothing, const TensorView& dloss, const TensorView& dlogits))

// ---- random (counter-based Philox: element i depends only on (seed, offset + i))
// out ~ U[0, 1) (float)
GRAFT_KERNEL(uniform, "W", cpu_opencl, (const TensorView& out, uint64_t seed, uint64_t offset))
// out ~ N(0, 1)
GRAFT_KERNEL(normal, "W", cpu_opencl, (const TensorView& out, uint64_t seed, uint64_t offset))
// Dropout's mask in one pass: out = [u >= p] / (1 - p) with u the uniform kernel's draw in
// out's dtype (a float draw is compared with float(p)), so it equals that composite bit for bit.
// Random kernels end in (seed, offset): graft::compile replays them with a fresh offset.
GRAFT_KERNEL(dropout_mask, "W", cpu, (const TensorView& out, double p, uint64_t seed, uint64_t offset))

// ---- optimizers: one fused in-place pass; every view contiguous, same dtype and numel.
// Adam/AdamW: updates param, m (exp_avg) and v (exp_avg_sq) from grad.
GRAFT_KERNEL(adam_step, "MRMM", cpu_opencl,
             (const TensorView& param, const TensorView& grad, const TensorView& m,
              const TensorView& v, const AdamStepArgs& a))
// SGD: updates param and the momentum buffer `buf` (unused, may be null, if momentum == 0).
GRAFT_KERNEL(sgd_step, "MRM", cpu_opencl,
             (const TensorView& param, const TensorView& grad, const TensorView& buf,
              const SgdStepArgs& a))
// Adagrad: updates param and the sum of squared gradients.
GRAFT_KERNEL(adagrad_step, "MRM", cpu_opencl,
             (const TensorView& param, const TensorView& grad, const TensorView& sum,
              const AdagradStepArgs& a))

// ---- fused attention: q [B,H,T,D], k [B,H,S,D], v [B,H,S,E] contiguous, mask an additive
// [B,H,T,S] view with broadcast strides (data null: none). out [B,H,T,E], lse [B,H,T]
// (logsumexp of each score row; +inf for a row with every key masked, whose out is 0).
GRAFT_KERNEL(attention, "RRRRWW", cpu_opencl,
             (const TensorView& q, const TensorView& k, const TensorView& v,
              const TensorView& mask, const AttentionArgs& a, const TensorView& out,
              const TensorView& lse))
// dq, dk, dv (written, contiguous) from dout, recomputing the probabilities from lse.
GRAFT_KERNEL(attention_backward, "RRRRRRRWWW", cpu_opencl,
             (const TensorView& q, const TensorView& k, const TensorView& v,
              const TensorView& mask, const AttentionArgs& a, const TensorView& out,
              const TensorView& lse, const TensorView& dout, const TensorView& dq,
              const TensorView& dk, const TensorView& dv))

// ---- 1-D convolution and pooling (ops/cpu/conv.cpp); inputs any strides, outputs contiguous.
// out[b, o, t] = bias[o] + sum_{i, k} w[o, i, k] x[b, g C_in/G + i, t stride - pad_l + k dil]
// (g = the group of o; taps outside x read 0; bias data null: none).
GRAFT_KERNEL(conv1d, "RRRW", cpu_opencl,
             (const TensorView& x, const TensorView& w, const TensorView& bias,
              const Conv1dArgs& a, const TensorView& out))
// dx [B, C_in, L] = the transpose of conv1d applied to dy (written, not accumulated).
GRAFT_KERNEL(conv1d_backward_input, "RRW", cpu_opencl,
             (const TensorView& dy, const TensorView& w, const Conv1dArgs& a,
              const TensorView& dx))
// dw [C_out, C_in/G, K] = sum_{b, t} dy x-taps; dbias [C_out] = sum_{b, t} dy (data null: skip).
GRAFT_KERNEL(conv1d_backward_weight, "RRWW", cpu_opencl,
             (const TensorView& x, const TensorView& dy, const Conv1dArgs& a,
              const TensorView& dw, const TensorView& dbias))
// out [B, C, L_out] = max or mean of each window of x [B, C, L]; for max, indices (int64,
// same shape) get the position in [0, L) of each maximum (the first one on ties).
GRAFT_KERNEL(pool1d, "RWW", cpu_opencl,
             (const TensorView& x, const Pool1dArgs& a, const TensorView& out,
              const TensorView& indices))
// dx [B, C, L] (written): max: dx[idx] += dy; avg: each dy spread evenly over its window.
GRAFT_KERNEL(pool1d_backward, "RRW", cpu_opencl,
             (const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,
              const TensorView& dx))

#undef GRAFT_KERNEL
