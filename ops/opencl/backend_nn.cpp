// Host side of the OpenCL 1-D convolution, pooling and fused attention kernels
// (kernels/conv.cl, kernels/attention.cl): argument checks, geometry structs, launch sizes.
// The semantics are those of the Backend entries in ops/kernels.h (CPU: ops/cpu/conv.cpp,
// ops/cpu/attention.cpp). Shapes: x [B, C_in, L], w [C_out, C_in/G, K], out [B, C_out, L_out];
// q [B, H, T, D], k [B, H, S, D], v [B, H, S, E].
#include "ops/opencl/backend_nn.h"

#include <cmath>

#include "ops/error.h"
#include "ops/opencl/runtime.h"

namespace graft::ocl {
namespace {

// Matches ConvGeo in kernels/conv.cl (all 64-bit fields).
struct ConvGeo {
  cl_long B, Cin, L, Cout, K, Lout, stride, pad_l, dil, cin_g, cout_g;
  cl_long kind, count_include_pad;
  cl_long xs[3], ws[3], ds[3];
};

void strides3(cl_long* dst, const TensorView& v) {
  for (int d = 0; d < 3; ++d) dst[d] = v.data ? cl_long(v.strides[d]) : 0;
}

Context& ctx_of(const TensorView& v, const char* op) {
  GRAFT_CHECK(!v.device.is_cpu(), "{}: expected an OpenCL tensor, got one on {}", op,
              v.device.str());
  return context(v.device.index);
}

void check_float_same(const char* op, const TensorView& ref,
                      std::initializer_list<const TensorView*> vs) {
  GRAFT_CHECK(is_floating(ref.dtype), "{}: expected a floating dtype (float32 or float64), got {}",
              op, ref.dtype);
  for (const TensorView* v : vs)
    if (v->data)
      GRAFT_CHECK(v->dtype == ref.dtype, "{}: dtype mismatch: expected {}, got {}", op, ref.dtype,
                  v->dtype);
}

// x_or_dx [B, C_in, L], w_or_dw [C_out, C_in/G, K], out_or_dy [B, C_out, L_out]; `written` is
// the one of them the op writes (contiguous), whose floating dtype the others share. The
// geometry carries the strides of all three (each kernel reads those of its inputs).
ConvGeo conv_geo(const char* op, const TensorView& x, const TensorView& w, const TensorView& y,
                 const Conv1dArgs& a, const TensorView& written) {
  check_float_same(op, written, {&x, &w, &y});
  GRAFT_ASSERT(written.is_contiguous());
  GRAFT_CHECK(x.rank() == 3 && w.rank() == 3 && y.rank() == 3,
              "{}: expected rank-3 x, w, out, got {}, {}, {}", op, x.shape, w.shape, y.shape);
  GRAFT_CHECK(a.groups >= 1 && a.stride >= 1 && a.dilation >= 1 && x.shape[1] % a.groups == 0 &&
                  w.shape[0] % a.groups == 0 && w.shape[1] == x.shape[1] / a.groups &&
                  y.shape[1] == w.shape[0] && y.shape[0] == x.shape[0],
              "{}: shapes x {}, w {}, out {} do not fit groups {} stride {} dilation {}", op,
              x.shape, w.shape, y.shape, a.groups, a.stride, a.dilation);
  ConvGeo g{};
  g.B = x.shape[0], g.Cin = x.shape[1], g.L = x.shape[2];
  g.Cout = w.shape[0], g.K = w.shape[2], g.Lout = y.shape[2];
  g.stride = a.stride, g.pad_l = a.pad_l, g.dil = a.dilation;
  g.cin_g = g.Cin / a.groups, g.cout_g = g.Cout / a.groups;
  strides3(g.xs, x);
  strides3(g.ws, w);
  strides3(g.ds, y);
  return g;
}

ConvGeo pool_geo(const char* op, const TensorView& x, const TensorView& y, const Pool1dArgs& a) {
  GRAFT_CHECK(x.rank() == 3 && y.rank() == 3 && x.shape[0] == y.shape[0] &&
                  x.shape[1] == y.shape[1],
              "{}: expected x [B, C, L] and out [B, C, L_out], got {} and {}", op, x.shape,
              y.shape);
  GRAFT_CHECK(a.kernel >= 1 && a.stride >= 1 && a.dilation >= 1,
              "{}: kernel, stride and dilation must be >= 1, got {}, {}, {}", op, a.kernel,
              a.stride, a.dilation);
  ConvGeo g{};
  g.B = x.shape[0], g.Cin = g.Cout = x.shape[1], g.L = x.shape[2], g.Lout = y.shape[2];
  g.K = a.kernel, g.stride = a.stride, g.pad_l = a.pad_l, g.dil = a.dilation;
  g.cin_g = g.cout_g = 1;
  g.kind = a.kind == PoolKind::max ? 0 : 1;
  g.count_include_pad = a.count_include_pad ? 1 : 0;
  return g;
}

}  // namespace

void conv1d(const TensorView& x, const TensorView& w, const TensorView& bias, const Conv1dArgs& a,
            const TensorView& out) {
  const char* op = "conv1d";
  check_float_same(op, out, {&bias});
  const ConvGeo g = conv_geo(op, x, w, out, a, out);
  const int64_t n = out.numel();
  if (n == 0) return;
  const cl_long bs = bias.data ? cl_long(bias.strides[0]) : 0;
  Launch(ctx_of(out, op), out.dtype, "conv1d_k", op)
      .val(g).buf(x).buf(w).buf(bias).val(bs).buf(out).run(size_t(n));
}

void conv1d_backward_input(const TensorView& dy, const TensorView& w, const Conv1dArgs& a,
                           const TensorView& dx) {
  const char* op = "conv1d_backward_input";
  const ConvGeo g = conv_geo(op, dx, w, dy, a, dx);
  const int64_t n = dx.numel();
  if (n == 0) return;
  Launch(ctx_of(dx, op), dx.dtype, "conv1d_bwd_input_k", op)
      .val(g).buf(dy).buf(w).buf(dx).run(size_t(n));
}

void conv1d_backward_weight(const TensorView& x, const TensorView& dy, const Conv1dArgs& a,
                            const TensorView& dw, const TensorView& dbias) {
  const char* op = "conv1d_backward_weight";
  check_float_same(op, dw, {&dbias});
  const ConvGeo g = conv_geo(op, x, dw, dy, a, dw);
  Context& c = ctx_of(dw, op);
  if (dw.numel() > 0)
    Launch(c, dw.dtype, "conv1d_bwd_weight_k", op)
        .val(g).buf(x).buf(dy).buf(dw).run(size_t(dw.numel()));
  if (dbias.data && g.Cout > 0) {
    GRAFT_ASSERT(dbias.is_contiguous());
    Launch(c, dw.dtype, "conv1d_bwd_bias_k", op).val(g).buf(dy).buf(dbias).run(size_t(g.Cout));
  }
}

void pool1d(const TensorView& x, const Pool1dArgs& a, const TensorView& out,
            const TensorView& indices) {
  const char* op = "pool1d";
  check_float_same(op, out, {&x});
  GRAFT_ASSERT(out.is_contiguous());
  GRAFT_CHECK(a.kind != PoolKind::max || (indices.data && indices.dtype == DType::i64 &&
                                          indices.shape == out.shape && indices.is_contiguous()),
              "{}: max pooling needs contiguous int64 indices of the output's shape {}", op,
              out.shape);
  ConvGeo g = pool_geo(op, x, out, a);
  strides3(g.xs, x);
  const int64_t n = out.numel();
  if (n == 0) return;
  TensorView idx = indices;
  if (a.kind != PoolKind::max) idx.data = nullptr;
  Launch(ctx_of(out, op), out.dtype, "pool1d_k", op)
      .val(g).buf(x).buf(out).buf(idx).run(size_t(n));
}

void pool1d_backward(const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,
                     const TensorView& dx) {
  const char* op = "pool1d_backward";
  check_float_same(op, dx, {&dy});
  GRAFT_ASSERT(dx.is_contiguous());
  ConvGeo g = pool_geo(op, dx, dy, a);
  strides3(g.ds, dy);
  TensorView idx = indices;
  if (a.kind == PoolKind::max) {
    GRAFT_CHECK(indices.data && indices.dtype == DType::i64 && indices.shape == dy.shape,
                "{}: max pooling needs int64 indices of dy's shape {}", op, dy.shape);
    strides3(g.ws, indices);
  } else {
    idx.data = nullptr;
  }
  const int64_t n = dx.numel();
  if (n == 0) return;
  Launch(ctx_of(dx, op), dx.dtype, "pool1d_bwd_k", op)
      .val(g).buf(dy).buf(idx).buf(dx).run(size_t(n));
}

// ---------------------------------------------------------------- attention
namespace {

// Matches AttnGeo in kernels/attention.cl.
struct AttnGeo {
  cl_long nb, nh, nt, ns, nd, ne;  // B, H, T, S, D, E
  cl_long ms[4];
  cl_long causal, causal_offset;
  cl_ulong seed, offset, thr;
};

AttnGeo attn_geo(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                 const TensorView& mask, const AttentionArgs& a) {
  GRAFT_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4,
              "{}: expected q, k, v of rank 4 ([B, H, T, D]), got {}, {}, {}", op, q.shape,
              k.shape, v.shape);
  check_float_same(op, q, {&k, &v, &mask});
  GRAFT_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(),
              "{}: internal error: q, k, v must be contiguous", op);
  GRAFT_CHECK(a.dropout_p >= 0 && a.dropout_p < 1, "{}: dropout_p must be in [0, 1), got {}", op,
              a.dropout_p);
  AttnGeo g{};
  g.nb = q.shape[0], g.nh = q.shape[1], g.nt = q.shape[2], g.nd = q.shape[3];
  g.ns = k.shape[2], g.ne = v.shape[3];
  GRAFT_CHECK(k.shape[0] == g.nb && k.shape[1] == g.nh && k.shape[3] == g.nd && v.shape[0] == g.nb &&
                  v.shape[1] == g.nh && v.shape[2] == g.ns,
              "{}: shapes q {}, k {}, v {} do not match", op, q.shape, k.shape, v.shape);
  if (mask.data) {
    GRAFT_CHECK(mask.rank() == 4, "{}: the mask must be a rank-4 view, got {}", op, mask.shape);
    for (int d = 0; d < 4; ++d) g.ms[d] = mask.shape[d] == 1 ? 0 : mask.strides[d];
  }
  g.causal = a.causal ? 1 : 0;
  g.causal_offset = a.causal_offset;
  g.seed = a.seed;
  g.offset = a.offset;
  // keep iff bits * 2^-53 >= p  <=>  bits >= ceil(p 2^53) (exact: scaling by a power of two)
  g.thr = a.dropout_p > 0 ? cl_ulong(std::ceil(a.dropout_p * 9007199254740992.0)) : 0;
  return g;
}

}  // namespace

void attention(const TensorView& q, const TensorView& k, const TensorView& v,
               const TensorView& mask, const AttentionArgs& a, const TensorView& out,
               const TensorView& lse) {
  const char* op = "attention";
  const AttnGeo g = attn_geo(op, q, k, v, mask, a);
  check_float_same(op, q, {&out, &lse});
  GRAFT_ASSERT(out.is_contiguous() && lse.is_contiguous());
  const int64_t rows = g.nb * g.nh * g.nt;
  if (rows == 0) return;
  Launch(ctx_of(q, op), q.dtype, "attn_fwd_k", op)
      .val(g).scalar(a.scale).scalar(1.0 / (1.0 - a.dropout_p))
      .buf(q).buf(k).buf(v).buf(mask).buf(out).buf(lse).run(size_t(rows));
}

void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& mask, const AttentionArgs& a, const TensorView& out,
                        const TensorView& lse, const TensorView& dout, const TensorView& dq,
                        const TensorView& dk, const TensorView& dv) {
  const char* op = "attention_backward";
  const AttnGeo g = attn_geo(op, q, k, v, mask, a);
  check_float_same(op, q, {&out, &lse, &dout, &dq, &dk, &dv});
  GRAFT_CHECK(out.is_contiguous() && dout.is_contiguous() && dq.is_contiguous() &&
                  dk.is_contiguous() && dv.is_contiguous(),
              "{}: internal error: out, dout, dq, dk, dv must be contiguous", op);
  Context& c = ctx_of(q, op);
  const double inv_keep = 1.0 / (1.0 - a.dropout_p);
  if (g.nb * g.nh * g.nt > 0)
    Launch(c, q.dtype, "attn_bwd_q_k", op)
        .val(g).scalar(a.scale).scalar(inv_keep).buf(q).buf(k).buf(v).buf(mask).buf(out)
        .buf(lse).buf(dout).buf(dq).run(size_t(g.nb * g.nh * g.nt));
  if (g.nb * g.nh * g.ns > 0)
    Launch(c, q.dtype, "attn_bwd_kv_k", op)
        .val(g).scalar(a.scale).scalar(inv_keep).buf(q).buf(k).buf(v).buf(mask).buf(out)
        .buf(lse).buf(dout).buf(dk).buf(dv).run(size_t(g.nb * g.nh * g.ns));
}

}  // namespace graft::ocl
