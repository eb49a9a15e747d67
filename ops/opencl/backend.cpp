// The OpenCL back-end table: host code of every kernel (argument checks, layouts, launch
// sizes). Kernels live in ops/opencl/kernels/*.cl; elementwise math is generated from
// ops/functors.h (codegen.cpp). Registered at start-up; contexts are created on first use.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "ops/error.h"
#include "ops/kernel_checks.h"
#include "ops/kernels.h"
#include "ops/opencl/backend_nn.h"
#include "ops/opencl/opencl.h"
#include "ops/opencl/runtime.h"

namespace graft::ocl {
namespace {

constexpr size_t kWG = 64;  // WG in kernels/common.cl
std::atomic<int> g_matmul_kernel{0};  // opencl::MatmulKernel

Context& ctx_of(const TensorView& v, const char* op) {
  GRAFT_CHECK(!v.device.is_cpu(), "{}: expected an OpenCL tensor, got one on {}", op,
              v.device.str());
  return context(v.device.index);
}

const char* suffix(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::b8: return "b8";
  }
  return "?";
}

void check_float(DType t, const char* op) {
  GRAFT_CHECK(is_floating(t), "{}: expected a floating dtype (float32 or float64), got {}", op, t);
}

void check_same(const char* op, DType want, std::initializer_list<const TensorView*> vs) {
  for (const TensorView* v : vs)
    if (v->data)
      GRAFT_CHECK(v->dtype == want, "{}: dtype mismatch: expected {}, got {}", op, want, v->dtype);
}

// A rank-0 view seen as shape [1] (the index kernels need a dim to index).
TensorView at_least_1d(TensorView v) {
  if (v.rank() == 0) {
    v.shape = Shape{1};
    v.strides = Shape{1};
  }
  return v;
}

// ---------------------------------------------------------------- memory
void fill(const TensorView& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  Layout L = make_layout(dst.shape, {&dst.strides});
  Launch(ctx_of(dst, "fill"), dst.dtype, "fill_k", "fill")
      .val(L).val(cl_long(n)).buf(dst).scalar(value).run(size_t(n));
}

void copy(const TensorView& dst, const TensorView& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  Layout L = make_layout(dst.shape, {&dst.strides, &src.strides});
  const std::string k = std::string("copy_from_") + suffix(src.dtype);
  Context& c = ctx_of(dst, "copy");
  GRAFT_CHECK(src.dtype != DType::f64 || c.fp64, "copy: opencl:{} has no float64 support",
              c.index);
  Launch(c, dst.dtype, k.c_str(), "copy").val(L).val(cl_long(n)).buf(dst).buf(src).run(size_t(n));
}

// ---------------------------------------------------------------- elementwise
void unary(UnaryOp op, double alpha, const TensorView& x, const TensorView& out) {
  const char* name = unary_name(op);
  check_float(x.dtype, name);
  check_same(name, x.dtype, {&out});
  const int64_t n = out.numel();
  if (n == 0) return;
  Layout L = make_layout(out.shape, {&x.strides, &out.strides});
  const std::string k = std::string("unary_") + name;
  Launch(ctx_of(out, name), x.dtype, k.c_str(), name)
      .val(L).val(cl_long(n)).buf(x).buf(out).scalar(alpha).run(size_t(n));
}

void unary_backward(UnaryOp op, double alpha, const TensorView& x, const TensorView& y_,
                    const TensorView& dy, const TensorView& dx) {
  const char* name = unary_name(op);
  check_float(dx.dtype, name);
  const TensorView& y = y_.data ? y_ : x;  // ops that do not read y may pass none
  check_same(name, dx.dtype, {&x, &y, &dy});
  const int64_t n = dx.numel();
  if (n == 0) return;
  Layout L = make_layout(dx.shape, {&x.strides, &y.strides, &dy.strides, &dx.strides});
  const std::string k = std::string("unary_bw_") + name;
  Launch(ctx_of(dx, name), dx.dtype, k.c_str(), name)
      .val(L).val(cl_long(n)).buf(x).buf(y).buf(dy).buf(dx).scalar(alpha).run(size_t(n));
}

void binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out) {
  const char* name = binary_name(op);
  check_float(out.dtype, name);
  check_same(name, out.dtype, {&a, &b});
  const int64_t n = out.numel();
  if (n == 0) return;
  Layout L = make_layout(out.shape, {&a.strides, &b.strides, &out.strides});
  const std::string k = std::string("binary_") + name;
  Launch(ctx_of(out, name), out.dtype, k.c_str(), name)
      .val(L).val(cl_long(n)).buf(a).buf(b).buf(out).run(size_t(n));
}

void compare(CompareOp op, const TensorView& a, const TensorView& b, const TensorView& out) {
  const char* name = compare_name(op);
  check_compare(op, a, b);
  const int64_t n = out.numel();
  if (n == 0) return;
  Layout L = make_layout(out.shape, {&a.strides, &b.strides, &out.strides});
  const std::string k = std::string("cmp_") + name;
  Launch(ctx_of(out, name), a.dtype, k.c_str(), name)
      .val(L).val(cl_long(n)).buf(a).buf(b).buf(out).run(size_t(n));
}

void where(const TensorView& cond, const TensorView& a, const TensorView& b,
           const TensorView& out) {
  check_where(cond, a, b, out);
  const int64_t n = out.numel();
  if (n == 0) return;
  Layout L = make_layout(out.shape, {&cond.strides, &a.strides, &b.strides, &out.strides});
  Launch(ctx_of(out, "where"), out.dtype, "where_k", "where")
      .val(L).val(cl_long(n)).buf(cond).buf(a).buf(b).buf(out).run(size_t(n));
}

// ---------------------------------------------------------------- reductions
void reduce(ReduceOp op, const TensorView& x, const TensorView& out) {
  GRAFT_CHECK(x.dtype == out.dtype, "reduce: output dtype {} differs from input dtype {}",
              out.dtype, x.dtype);
  check_float(x.dtype, "reduce");
  GRAFT_CHECK(out.rank() == x.rank(), "reduce: output rank {} differs from input rank {}",
              out.rank(), x.rank());
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  // Kept dims (out, x strides) and reduced dims (x strides).
  Shape ks, rs;
  Strides kx, ko, rx;
  for (int d = 0; d < x.rank(); ++d) {
    if (out.shape[d] == x.shape[d]) {
      ks.push_back(x.shape[d]);
      kx.push_back(x.strides[d]);
      ko.push_back(out.strides[d]);
    } else {
      GRAFT_CHECK(out.shape[d] == 1, "reduce: output dim {} is {}, expected 1 or {}", d,
                  out.shape[d], x.shape[d]);
      rs.push_back(x.shape[d]);
      rx.push_back(x.strides[d]);
    }
  }
  const Layout Lo = make_layout(ks, {&kx, &ko}), Li = make_layout(rs, {&rx});
  const int64_t R = rs.numel() * (x.numel() == 0 ? 0 : 1);
  Context& c = ctx_of(out, "reduce");
  const bool seq = R <= 32 || (n_out >= 1024 && R <= 1024);
  if (seq) {
    Launch(c, x.dtype, "reduce_seq", "reduce")
        .val(Lo).val(Li).val(cl_long(n_out)).val(cl_long(R)).val(cl_int(op)).buf(x).buf(out)
        .run(size_t(n_out));
  } else {
    Launch(c, x.dtype, "reduce_wg", "reduce")
        .val(Lo).val(Li).val(cl_long(R)).val(cl_int(op)).buf(x).buf(out)
        .run(size_t(n_out) * kWG, kWG);
  }
}

// out = running sum of x along dim: one work item per line (every dim but dim fixed).
void cumsum(const TensorView& x, int dim, bool reverse, const TensorView& out) {
  check_float(x.dtype, "cumsum");
  check_same("cumsum", out.dtype, {&x});
  GRAFT_CHECK(x.shape == out.shape && dim >= 0 && dim < x.rank(),
              "cumsum: shapes {} -> {} along dim {}", x.shape.str(), out.shape.str(), dim);
  const int64_t N = x.shape[dim], lines = N == 0 ? 0 : x.numel() / N;
  if (lines == 0) return;
  Shape ls;
  Strides lx, lo;
  for (int d = 0; d < x.rank(); ++d)
    if (d != dim) ls.push_back(x.shape[d]), lx.push_back(x.strides[d]), lo.push_back(out.strides[d]);
  const Layout L = make_layout(ls, {&lx, &lo});
  Launch(ctx_of(out, "cumsum"), x.dtype, "cumsum_k", "cumsum")
      .val(L).val(cl_long(lines)).val(cl_long(N)).val(cl_long(x.strides[dim]))
      .val(cl_long(out.strides[dim])).val(cl_int(reverse)).buf(x).buf(out).run(size_t(lines));
}

// ---------------------------------------------------------------- matmul
void matmul_impl(const TensorView& a, const TensorView& b, const TensorView* bias,
                 const TensorView& out, const char* op) {
  check_float(out.dtype, op);
  check_same(op, out.dtype, {&a, &b});
  GRAFT_CHECK(a.rank() >= 2 && b.rank() >= 2 && out.rank() >= 2,
              "{}: expected operands of rank >= 2, got {} and {}", op, a.shape, b.shape);
  GRAFT_ASSERT(out.is_contiguous());
  const int r = out.rank(), ra = a.rank(), rb = b.rank();
  const int64_t M = out.shape[r - 2], N = out.shape[r - 1], K = a.shape[ra - 1];
  GRAFT_CHECK(b.shape[rb - 2] == K && a.shape[ra - 2] == M && b.shape[rb - 1] == N,
              "{}: shapes {} @ {} do not give {}", op, a.shape, b.shape, out.shape);
  if (out.numel() == 0) return;
  Shape bs;
  Strides sa, sb, so;
  int64_t inner = M * N;
  for (int d = r - 3; d >= 0; --d) {
    const int da = d - (r - ra), db = d - (r - rb);
    bs.insert(0, out.shape[d]);
    sa.insert(0, da >= 0 && a.shape[da] != 1 ? a.strides[da] : 0);
    sb.insert(0, db >= 0 && b.shape[db] != 1 ? b.strides[db] : 0);
    so.insert(0, inner);
    inner *= out.shape[d];
  }
  const Layout L = make_layout(bs, {&sa, &sb, &so});
  const int64_t nbatch = bs.numel();
  Context& c = ctx_of(out, op);
  using MK = opencl::MatmulKernel;
  MK mode = MK(g_matmul_kernel.load());
  const bool vec_ok = b.strides[rb - 1] == 1 || N == 1;
  if (mode == MK::vec && !vec_ok) mode = MK::tiled;
  if (mode == MK::automatic) {
    if (M * N * K < 32768) mode = MK::naive;
    else if (c.is_cpu_device && vec_ok) mode = MK::vec;
    else mode = c.max_work_group >= 256 ? MK::tiled : MK::naive;
  }
  const bool tiled = mode == MK::tiled;
  const char* kname = tiled ? "matmul_tiled" : mode == MK::vec ? "matmul_vec" : "matmul_naive";
  const cl_long bias_s = bias ? cl_long(bias->strides[bias->rank() - 1]) : 0;
  TensorView none;
  none.dtype = out.dtype;
  const TensorView& bv = bias ? *bias : none;
  Launch l(c, out.dtype, kname, op);
  l.val(L).val(cl_long(M)).val(cl_long(N)).val(cl_long(K))
      .buf(a).val(cl_long(a.strides[ra - 2])).val(cl_long(a.strides[ra - 1]))
      .buf(b).val(cl_long(b.strides[rb - 2])).val(cl_long(b.strides[rb - 1]))
      .buf(out).buf(bv).val(bias_s).val(cl_int(bias ? 1 : 0));
  if (tiled) {
    constexpr size_t TS = 64, TW = 16;
    const size_t g[3] = {size_t((N + TS - 1) / TS) * TW, size_t((M + TS - 1) / TS) * TW,
                         size_t(nbatch)};
    const size_t lo[3] = {TW, TW, 1};
    l.run(3, g, lo);
  } else if (mode == MK::vec) {
    const size_t g[3] = {size_t((M + 7) / 8), size_t((N + 15) / 16), size_t(nbatch)};
    l.run(3, g, nullptr);
  } else {
    const size_t g[3] = {size_t(N), size_t(M), size_t(nbatch)};
    l.run(3, g, nullptr);
  }
}

// prec: always f32 here (autocast applies to CPU products only; the kernel computes in f32).
void matmul(const TensorView& a, const TensorView& b, const TensorView& out, Precision /*prec*/) {
  matmul_impl(a, b, nullptr, out, "matmul");
}

void linear(const TensorView& x, const TensorView& w, const TensorView& bias,
            const TensorView& out, Precision /*prec*/) {
  GRAFT_CHECK(w.rank() == 2, "linear: weight must be [O, I], got {}", w.shape);
  TensorView wt = w;  // w^T [I, O] as a strided view
  std::swap(wt.shape[0], wt.shape[1]);
  std::swap(wt.strides[0], wt.strides[1]);
  matmul_impl(x, wt, bias.data ? &bias : nullptr, out, "linear");
}

// ---------------------------------------------------------------- normalisation
struct Rows {
  int64_t n, c;
};
Rows rows_of(const TensorView& x, const char* op) {
  GRAFT_CHECK(x.is_contiguous(), "{}: internal error: expected a contiguous tensor", op);
  const int64_t c = x.rank() == 0 ? 1 : x.shape.back();
  return {c == 0 ? 0 : x.numel() / c, c};
}

void softmax(const TensorView& x, const TensorView& y, bool log) {
  check_float(x.dtype, "softmax");
  const auto [n, c] = rows_of(x, "softmax");
  rows_of(y, "softmax");
  if (n == 0) return;
  Launch(ctx_of(x, "softmax"), x.dtype, "softmax_k", "softmax")
      .val(cl_long(c)).val(cl_int(log)).buf(x).buf(y).run(size_t(n) * kWG, kWG);
}

void softmax_backward(const TensorView& y, const TensorView& dy, const TensorView& dx, bool log) {
  check_float(y.dtype, "softmax_backward");
  const auto [n, c] = rows_of(y, "softmax_backward");
  rows_of(dy, "softmax_backward");
  rows_of(dx, "softmax_backward");
  if (n == 0) return;
  Launch(ctx_of(y, "softmax_backward"), y.dtype, "softmax_bw_k", "softmax_backward")
      .val(cl_long(c)).val(cl_int(log)).buf(y).buf(dy).buf(dx).run(size_t(n) * kWG, kWG);
}

void layer_norm(const TensorView& x, const TensorView& gamma, const TensorView& beta, double eps,
                const TensorView& y, const TensorView& mean, const TensorView& rstd) {
  check_float(x.dtype, "layer_norm");
  check_same("layer_norm", x.dtype, {&gamma, &beta, &y, &mean, &rstd});
  const auto [n, c] = rows_of(x, "layer_norm");
  rows_of(y, "layer_norm");
  if (n == 0) return;
  Launch(ctx_of(x, "layer_norm"), x.dtype, "layer_norm_k", "layer_norm")
      .val(cl_long(c)).scalar(eps).buf(x).buf(gamma).buf(beta).buf(y).buf(mean).buf(rstd)
      .run(size_t(n) * kWG, kWG);
}

void layer_norm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                         const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                         const TensorView& dgamma, const TensorView& dbeta) {
  const char* op = "layer_norm_backward";
  check_float(x.dtype, op);
  check_same(op, x.dtype, {&gamma, &mean, &rstd, &dy, &dx, &dgamma, &dbeta});
  const auto [n, c] = rows_of(x, op);
  rows_of(dy, op);
  rows_of(dx, op);
  Context& ctx = ctx_of(x, op);
  if (n > 0)
    Launch(ctx, x.dtype, "layer_norm_bw_k", op)
        .val(cl_long(c)).buf(x).buf(gamma).buf(mean).buf(rstd).buf(dy).buf(dx)
        .run(size_t(n) * kWG, kWG);
  if (dgamma.data || dbeta.data)
    Launch(ctx, x.dtype, "layer_norm_params_k", op)
        .val(cl_long(n)).val(cl_long(c)).buf(x).buf(mean).buf(rstd).buf(dy).buf(dgamma)
        .buf(dbeta).run(size_t(c));
}

// ---------------------------------------------------------------- indexing
void check_index(const char* op, const TensorView& index) {
  GRAFT_CHECK(index.dtype == DType::i64, "{}: index must be int64, got {}", op, index.dtype);
}
int check_dim(const char* op, int dim, const TensorView& v) {
  GRAFT_CHECK(dim >= 0 && dim < v.rank(), "{}: dim {} out of range for rank {}", op, dim,
              v.rank());
  return dim;
}

// The element stride of an index read as a flat list (any rank, row-major order).
cl_long flat_stride(const TensorView& index, const char* op) {
  const Layout L = make_layout(index.shape, {&index.strides});
  GRAFT_CHECK(L.rank <= 1, "{}: internal error: index of shape {} / strides {} is not a flat "
              "list; hint: pass index.contiguous()", op, index.shape, index.strides);
  return L.rank == 0 ? 0 : cl_long(L.st[0][0]);
}

void index_select(const TensorView& src_, int dim, const TensorView& index,
                  const TensorView& out_) {
  const char* op = "index_select";
  check_index(op, index);
  const TensorView src = at_least_1d(src_), out = at_least_1d(out_);
  check_dim(op, dim, src);
  GRAFT_CHECK(out.rank() == src.rank() && out.shape[dim] == index.numel(),
              "{}: out has shape {}, expected src {} with dim {} of size {}", op, out.shape,
              src.shape, dim, index.numel());
  const int64_t n = out.numel();
  if (n == 0) return;
  const Layout L = make_layout(out.shape, {&out.strides, &src.strides}, false);
  const cl_long is = flat_stride(index, op);
  Launch(ctx_of(out, op), src.dtype, "index_select_k", op)
      .val(L).val(cl_long(n)).val(cl_int(dim)).val(cl_long(src.shape[dim])).buf(src).buf(index)
      .val(is).buf(out).run(size_t(n));
}

void index_add(const TensorView& dst_, int dim, const TensorView& index, const TensorView& src_) {
  const char* op = "index_add";
  check_index(op, index);
  const TensorView dst = at_least_1d(dst_), src = at_least_1d(src_);
  check_float(dst.dtype, op);
  check_same(op, dst.dtype, {&src});
  check_dim(op, dim, dst);
  GRAFT_CHECK(src.rank() == dst.rank() && src.shape[dim] == index.numel(),
              "{}: src has shape {}, expected dst {} with dim {} of size {}", op, src.shape,
              dst.shape, dim, index.numel());
  const int64_t n = src.numel();
  if (n == 0) return;
  const Layout L = make_layout(src.shape, {&src.strides, &dst.strides}, false);
  const cl_long is = flat_stride(index, op);
  Launch(ctx_of(dst, op), dst.dtype, "index_add_k", op)
      .val(L).val(cl_long(n)).val(cl_int(dim)).val(cl_long(dst.shape[dim])).buf(dst).buf(index)
      .val(is).buf(src).run(size_t(n));
}

void gather(const TensorView& src_, int dim, const TensorView& index_, const TensorView& out_) {
  const char* op = "gather";
  check_index(op, index_);
  const TensorView src = at_least_1d(src_), index = at_least_1d(index_), out = at_least_1d(out_);
  check_dim(op, dim, src);
  GRAFT_CHECK(out.shape == index.shape && index.rank() == src.rank(),
              "{}: out {} and index {} must have the same shape, of src's rank {}", op,
              out.shape, index.shape, src.rank());
  const int64_t n = index.numel();
  if (n == 0) return;
  const Layout L = make_layout(index.shape, {&index.strides, &out.strides, &src.strides}, false);
  Launch(ctx_of(out, op), src.dtype, "gather_k", op)
      .val(L).val(cl_long(n)).val(cl_int(dim)).val(cl_long(src.shape[dim])).buf(src).buf(index)
      .buf(out).run(size_t(n));
}

void scatter_add(const TensorView& dst_, int dim, const TensorView& index_,
                 const TensorView& src_) {
  const char* op = "scatter_add";
  check_index(op, index_);
  const TensorView dst = at_least_1d(dst_), index = at_least_1d(index_), src = at_least_1d(src_);
  check_float(dst.dtype, op);
  check_same(op, dst.dtype, {&src});
  check_dim(op, dim, dst);
  GRAFT_CHECK(index.rank() == dst.rank() && src.rank() == dst.rank(),
              "{}: index {}, src {} and dst {} must have the same rank", op, index.shape,
              src.shape, dst.shape);
  const int64_t n = index.numel();
  if (n == 0) return;
  const Layout L = make_layout(index.shape, {&index.strides, &src.strides, &dst.strides}, false);
  Launch(ctx_of(dst, op), dst.dtype, "scatter_add_k", op)
      .val(L).val(cl_long(n)).val(cl_int(dim)).val(cl_long(dst.shape[dim])).buf(dst).buf(index)
      .buf(src).run(size_t(n));
}

// ---------------------------------------------------------------- losses
void check_ce(const char* op, const TensorView& scores, const TensorView& target,
              const TensorView& rows, const TensorView& out, double ls) {
  GRAFT_CHECK(ls >= 0 && ls < 1, "{}: label_smoothing must be in [0, 1), got {}", op, ls);
  GRAFT_CHECK(scores.rank() == 2, "{}: expected logits of shape [N, V], got {}", op, scores.shape);
  GRAFT_CHECK(target.dtype == DType::i64, "{}: target must be int64, got {}", op, target.dtype);
  const int64_t N = scores.shape[0];
  GRAFT_CHECK(target.rank() == 1 && rows.rank() == 1 && target.shape[0] == N &&
                  rows.shape[0] == N && out.shape == scores.shape,
              "{}: shapes do not match: logits {}, target {}, per-row {}, output {}", op,
              scores.shape, target.shape, rows.shape, out.shape);
  check_float(scores.dtype, op);
  check_same(op, scores.dtype, {&rows, &out});
}

void cross_entropy(const TensorView& logits, const TensorView& target, int64_t ignore_index,
                   double ls, const TensorView& loss, const TensorView& logp) {
  const char* op = "cross_entropy";
  check_ce(op, logits, target, loss, logp, ls);
  const int64_t N = logits.shape[0], V = logits.shape[1];
  if (N == 0) return;
  Launch(ctx_of(logits, op), logits.dtype, "ce_fwd_k", op)
      .val(cl_long(V)).val(cl_long(ignore_index)).scalar(1 - ls).scalar(ls / double(V))
      .buf(logits).val(cl_long(logits.strides[0])).val(cl_long(logits.strides[1]))
      .buf(target).val(cl_long(target.strides[0]))
      .buf(loss).val(cl_long(loss.strides[0]))
      .buf(logp).val(cl_long(logp.strides[0])).val(cl_long(logp.strides[1]))
      .run(size_t(N) * kWG, kWG);
}

void cross_entropy_backward(const TensorView& logp, const TensorView& target,
                            int64_t ignore_index, double ls, const TensorView& dloss,
                            const TensorView& dlogits) {
  const char* op = "cross_entropy_backward";
  check_ce(op, logp, target, dloss, dlogits, ls);
  const int64_t N = logp.shape[0], V = logp.shape[1];
  if (N * V == 0) return;
  Launch(ctx_of(logp, op), logp.dtype, "ce_bwd_k", op)
      .val(cl_long(N)).val(cl_long(V)).val(cl_long(ignore_index)).scalar(1 - ls)
      .scalar(ls / double(V))
      .buf(logp).val(cl_long(logp.strides[0])).val(cl_long(logp.strides[1]))
      .buf(target).val(cl_long(target.strides[0]))
      .buf(dloss).val(cl_long(dloss.strides[0]))
      .buf(dlogits).val(cl_long(dlogits.strides[0])).val(cl_long(dlogits.strides[1]))
      .run(size_t(N * V));
}

// ---------------------------------------------------------------- random
void random_fill(const char* op, const char* kernel, const TensorView& out, uint64_t seed,
                 uint64_t offset) {
  GRAFT_CHECK(is_floating(out.dtype),
              "{}: expected a floating output (float32 or float64), got {}", op, out.dtype);
  const int64_t n = out.numel();
  if (n == 0) return;
  const Layout L = make_layout(out.shape, {&out.strides});
  Launch(ctx_of(out, op), out.dtype, kernel, op)
      .val(L).val(cl_long(n)).val(cl_ulong(seed)).val(cl_ulong(offset)).buf(out).run(size_t(n));
}
void uniform(const TensorView& out, uint64_t seed, uint64_t offset) {
  random_fill("uniform", "uniform_k", out, seed, offset);
}
void normal(const TensorView& out, uint64_t seed, uint64_t offset) {
  random_fill("normal", "normal_k", out, seed, offset);
}

// ---------------------------------------------------------------- optimizers
void check_step(const char* op, const TensorView& p, std::initializer_list<const TensorView*> vs) {
  check_float(p.dtype, op);
  GRAFT_CHECK(p.is_contiguous(), "{}: parameter must be contiguous", op);
  for (const TensorView* v : vs) {
    if (!v->data) continue;
    GRAFT_CHECK(v->dtype == p.dtype && v->numel() == p.numel() && v->is_contiguous(),
                "{}: state of shape {} / {} does not match the parameter {} / {}", op, v->shape,
                v->dtype, p.shape, p.dtype);
  }
}

void adam_step(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
               const AdamStepArgs& a) {
  check_step("adam_step", p, {&g, &m, &v});
  const int64_t n = p.numel();
  if (n == 0) return;
  Launch(ctx_of(p, "adam_step"), p.dtype, "adam_k", "adam_step")
      .val(cl_long(n)).buf(p).buf(g).buf(m).buf(v)
      .scalar(1 - a.lr * a.weight_decay).scalar(a.weight_decay).val(cl_int(a.decoupled))
      .scalar(1 - a.beta1).scalar(1 - a.beta2).scalar(a.beta2)
      .scalar(a.lr / a.bias_correction1).scalar(std::sqrt(a.bias_correction2)).scalar(a.eps)
      .run(size_t(n));
}

void sgd_step(const TensorView& p, const TensorView& g, const TensorView& buf,
              const SgdStepArgs& a) {
  check_step("sgd_step", p, {&g, &buf});
  GRAFT_CHECK(a.momentum == 0 || buf.data, "sgd_step: momentum {} needs a buffer", a.momentum);
  const int64_t n = p.numel();
  if (n == 0) return;
  Launch(ctx_of(p, "sgd_step"), p.dtype, "sgd_k", "sgd_step")
      .val(cl_long(n)).buf(p).buf(g).buf(buf)
      .scalar(a.lr).scalar(a.weight_decay).scalar(a.momentum).scalar(1 - a.dampening)
      .val(cl_int(a.nesterov)).val(cl_int(a.first_step)).run(size_t(n));
}

void adagrad_step(const TensorView& p, const TensorView& g, const TensorView& sum,
                  const AdagradStepArgs& a) {
  check_step("adagrad_step", p, {&g, &sum});
  const int64_t n = p.numel();
  if (n == 0) return;
  Launch(ctx_of(p, "adagrad_step"), p.dtype, "adagrad_k", "adagrad_step")
      .val(cl_long(n)).buf(p).buf(g).buf(sum)
      .scalar(a.lr).scalar(a.weight_decay).scalar(a.eps).run(size_t(n));
}

// The table from the kernel list: .k = k for each kernel marked cpu_opencl (defined above or in
// backend_nn.cpp; a missing one is a compile error), null for the CPU-only ones.
#define GRAFT_OPENCL_ENTRY_cpu_opencl(k) .k = k,
#define GRAFT_OPENCL_ENTRY_cpu(k)
const Backend kOpenclBackend{
    .name = "opencl",
#define GRAFT_KERNEL(k, roles, devices, params) GRAFT_OPENCL_ENTRY_##devices(k)
#include "ops/kernel_list.h"
};
#undef GRAFT_OPENCL_ENTRY_cpu_opencl
#undef GRAFT_OPENCL_ENTRY_cpu

// The table with the CPU fallback filled in (null entries run on the host).
const Backend kFallbackBackend = with_cpu_fallback(kOpenclBackend);
std::atomic<bool> g_fallback{false};


struct Registrar {
  Registrar() { register_opencl(); }
} g_registrar;

}  // namespace

void register_storage_hooks();  // runtime.cpp

void register_opencl() {
  const char* e = std::getenv("GRAFT_OPENCL_FALLBACK");
  const bool on = e && std::string(e) == "1";
  g_fallback = on;
  register_backend(Device::Kind::opencl, on ? &kFallbackBackend : &kOpenclBackend);
  register_storage_hooks();
}

}  // namespace graft::ocl

namespace graft::opencl {
void set_matmul_kernel(MatmulKernel k) { ocl::g_matmul_kernel.store(int(k)); }
void set_cpu_fallback(bool on) {
  ocl::g_fallback = on;
  register_backend(Device::Kind::opencl, on ? &ocl::kFallbackBackend : &ocl::kOpenclBackend);
}
bool cpu_fallback() { return ocl::g_fallback.load(); }
uint64_t fallback_calls() { return ocl::fallback_calls(); }
}  // namespace graft::opencl
