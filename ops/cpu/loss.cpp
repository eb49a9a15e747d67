// Cross-entropy with ignore_index and label smoothing, over logits [N, V] (N rows, V classes).
//
//   logp[n]  = log_softmax(logits[n]) = logits[n] - lse[n],  lse = max + log(sum exp(x - max))
//   loss[n]  = -(1 - ls) * logp[n, t] - ls / V * sum_v logp[n, v]          (0 if t == ignore)
//   dlogits  = dloss[n] * (exp(logp[n]) - (1 - ls) * onehot(t) - ls / V)  (0 if t == ignore)
//
// Subtracting the row max keeps exp() in (0, 1], so large logits neither overflow nor lose the
// small classes. The forward saves logp so the backward needs only one exp per element.
// Fast kernels: xsimd rows, OpenMP over rows. Reference: scalar, double accumulation.
#include <algorithm>
#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "ops/cpu/cpu_kernels.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

struct CeArgs {
  int64_t N, V;
};

// Shapes, dtypes and label smoothing, shared by both directions; returns N and V.
// scores: logits or logp [N, V]; rows: loss or dloss [N]; out: logp or dlogits [N, V].
CeArgs check_ce(const char* op, const TensorView& scores, const TensorView& target,
                const TensorView& rows, const TensorView& out, double ls) {
  GRAFT_CHECK(ls >= 0 && ls < 1, "{}: label_smoothing must be in [0, 1), got {}", op, ls);
  GRAFT_CHECK(scores.rank() == 2, "{}: expected logits of shape [N, V], got {}", op,
              scores.shape);
  GRAFT_CHECK(target.dtype == DType::i64, "{}: target must be int64, got {}", op, target.dtype);
  const int64_t N = scores.shape[0], V = scores.shape[1];
  GRAFT_CHECK(target.rank() == 1 && rows.rank() == 1 && target.shape[0] == N &&
                  rows.shape[0] == N && out.shape == scores.shape,
              "{}: shapes do not match: logits {}, target {}, per-row {}, output {}", op,
              scores.shape, target.shape, rows.shape, out.shape);
  GRAFT_CHECK(scores.dtype == rows.dtype && scores.dtype == out.dtype,
              "{}: dtype mismatch ({}, {}, {})", op, scores.dtype, rows.dtype, out.dtype);
  return {N, V};
}

// Stride of a 1-D [N] view; it may be 0 (a broadcast dloss).
inline int64_t stride0(const TensorView& v) { return v.strides[0]; }

// Every target must be a class in [0, V) or ignore_index. Checked up-front so that no
// exception has to leave an OpenMP region.
void check_targets(const char* op, const TensorView& target, int64_t N, int64_t V,
                   int64_t ignore_index) {
  const int64_t* t = target.ptr<int64_t>();
  const int64_t ts = stride0(target);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t c = t[n * ts];
    GRAFT_CHECK(c == ignore_index || (c >= 0 && c < V),
                "{}: target {} at row {} is out of range for V = {} classes (valid: 0..{}, or "
                "ignore_index {})",
                op, c, n, V, V - 1, ignore_index);
  }
}

// ---- fast row kernels

template <class T> T hmax(const xsimd::batch<T>& b) {
  alignas(64) T lanes[xsimd::batch<T>::size];
  b.store_aligned(lanes);
  T m = lanes[0];
  for (T v : lanes) m = std::max(m, v);
  return m;
}

// lp[0..V) = log_softmax(x[0..V)); returns sum_v lp[v] (for the label-smoothing term).
template <class T> T log_softmax_row(const T* x, T* lp, int64_t V) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = B::size;
  const int64_t Vw = V / W * W;
  // Row max.
  T m = -std::numeric_limits<T>::infinity();
  if (Vw) {
    B vm = B::load_unaligned(x);
    for (int64_t j = W; j < Vw; j += W) vm = xsimd::max(vm, B::load_unaligned(x + j));
    m = hmax(vm);
  }
  for (int64_t j = Vw; j < V; ++j) m = std::max(m, x[j]);
  // Sum of exp(x - max): every term is in (0, 1].
  B vs(T(0));
  for (int64_t j = 0; j < Vw; j += W) vs += xsimd::exp(B::load_unaligned(x + j) - B(m));
  T s = xsimd::hadd(vs);
  for (int64_t j = Vw; j < V; ++j) s += std::exp(x[j] - m);
  const T lse = m + std::log(s);
  // logp = x - lse, and its sum.
  B vl(T(0));
  for (int64_t j = 0; j < Vw; j += W) {
    const B v = B::load_unaligned(x + j) - B(lse);
    v.store_unaligned(lp + j);
    vl += v;
  }
  T sum = xsimd::hadd(vl);
  for (int64_t j = Vw; j < V; ++j) sum += (lp[j] = x[j] - lse);
  return sum;
}

// x, lp: [N, V] with row strides xs, lps (unit column stride); tgt, loss: [N] with strides.
template <class T>
void ce_forward(const T* x, int64_t xs, const int64_t* tgt, int64_t ts, T* loss, int64_t loss_s,
                T* lp, int64_t lps, int64_t N, int64_t V, int64_t ignore_index, double ls) {
  const T keep = T(1 - ls), spread = T(ls / double(V));
  auto row = [&](int64_t n) {
    T* lrow = lp + n * lps;
    const T sum = log_softmax_row(x + n * xs, lrow, V);
    const int64_t t = tgt[n * ts];
    loss[n * loss_s] = t == ignore_index ? T(0) : -keep * lrow[t] - spread * sum;
  };
  // Small problems skip OpenMP entirely: an `if (false)` region still makes (and allocates) a
  // team of one on every call.
  if (N * V >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) row(n);
  } else {
    for (int64_t n = 0; n < N; ++n) row(n);
  }
}

// lp, dx: [N, V] with row strides lps, dxs; tgt, dloss: [N] with strides (ds may be 0).
template <class T>
void ce_backward(const T* lp, int64_t lps, const int64_t* tgt, int64_t ts, const T* dloss,
                 int64_t ds, T* dx, int64_t dxs, int64_t N, int64_t V, int64_t ignore_index,
                 double ls) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = B::size;
  const int64_t Vw = V / W * W;
  auto row = [&](int64_t n) {
    const T* l = lp + n * lps;
    T* d = dx + n * dxs;
    const int64_t t = tgt[n * ts];
    if (t == ignore_index) {
      std::fill(d, d + V, T(0));
      return;
    }
    // dx = g * softmax - g * ls/V everywhere, then - g * (1 - ls) at the target.
    const T g = dloss[n * ds], c = g * T(ls / double(V));
    for (int64_t j = 0; j < Vw; j += W)
      (B(g) * xsimd::exp(B::load_unaligned(l + j)) - B(c)).store_unaligned(d + j);
    for (int64_t j = Vw; j < V; ++j) d[j] = g * std::exp(l[j]) - c;
    d[t] -= g * T(1 - ls);
  };
  if (N * V >= kParallelGrain) {  // (see ce_forward)
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) row(n);
  } else {
    for (int64_t n = 0; n < N; ++n) row(n);
  }
}

}  // namespace

void cross_entropy(const TensorView& logits, const TensorView& target, int64_t ignore_index,
                   double label_smoothing, const TensorView& loss, const TensorView& logp) {
  const auto [N, V] = check_ce("cross_entropy", logits, target, loss, logp, label_smoothing);
  // Rows must be unit-stride for the vector loads; anything else takes the reference path.
  if (logits.strides[1] != 1 || logp.strides[1] != 1)
    return ref::cross_entropy(logits, target, ignore_index, label_smoothing, loss, logp);
  check_targets("cross_entropy", target, N, V, ignore_index);
  const int64_t xs = logits.strides[0], lps = logp.strides[0];
  GRAFT_DISPATCH_FLOAT(logits.dtype, "cross_entropy", T, [&] {
    ce_forward(logits.ptr<T>(), xs, target.ptr<int64_t>(), stride0(target), loss.ptr<T>(),
               stride0(loss), logp.ptr<T>(), lps, N, V, ignore_index, label_smoothing);
  });
}

void cross_entropy_backward(const TensorView& logp, const TensorView& target,
                            int64_t ignore_index, double label_smoothing,
                            const TensorView& dloss, const TensorView& dlogits) {
  const auto [N, V] =
      check_ce("cross_entropy_backward", logp, target, dloss, dlogits, label_smoothing);
  if (logp.strides[1] != 1 || dlogits.strides[1] != 1)
    return ref::cross_entropy_backward(logp, target, ignore_index, label_smoothing, dloss,
                                       dlogits);
  check_targets("cross_entropy_backward", target, N, V, ignore_index);
  const int64_t lps = logp.strides[0], dxs = dlogits.strides[0];
  GRAFT_DISPATCH_FLOAT(logp.dtype, "cross_entropy_backward", T, [&] {
    ce_backward(logp.ptr<T>(), lps, target.ptr<int64_t>(), stride0(target), dloss.ptr<T>(),
                stride0(dloss), dlogits.ptr<T>(), dxs, N, V, ignore_index, label_smoothing);
  });
}

// ---------------------------------------------------------------------------------------------
// Reference kernels: one row at a time, sums in double, any strides.

namespace ref {

void cross_entropy(const TensorView& logits, const TensorView& target, int64_t ignore_index,
                   double label_smoothing, const TensorView& loss, const TensorView& logp) {
  const auto [N, V] = check_ce("cross_entropy", logits, target, loss, logp, label_smoothing);
  check_targets("cross_entropy", target, N, V, ignore_index);
  const double ls = label_smoothing;
  GRAFT_DISPATCH_FLOAT(logits.dtype, "cross_entropy", T, [&] {
    const T* x = logits.ptr<T>();
    const int64_t* tgt = target.ptr<int64_t>();
    T* lp = logp.ptr<T>();
    T* out = loss.ptr<T>();
    const int64_t x0 = logits.strides[0], x1 = logits.strides[1];
    const int64_t l0 = logp.strides[0], l1 = logp.strides[1];
    for (int64_t n = 0; n < N; ++n) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t v = 0; v < V; ++v) m = std::max(m, double(x[n * x0 + v * x1]));
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(double(x[n * x0 + v * x1]) - m);
      const double lse = m + std::log(s);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double l = double(x[n * x0 + v * x1]) - lse;
        lp[n * l0 + v * l1] = T(l);
        sum += l;
      }
      const int64_t t = tgt[n * stride0(target)];
      out[n * stride0(loss)] =
          t == ignore_index
              ? T(0)
              : T(-(1 - ls) * (double(x[n * x0 + t * x1]) - lse) - ls / double(V) * sum);
    }
  });
}

void cross_entropy_backward(const TensorView& logp, const TensorView& target,
                            int64_t ignore_index, double label_smoothing,
                            const TensorView& dloss, const TensorView& dlogits) {
  const auto [N, V] =
      check_ce("cross_entropy_backward", logp, target, dloss, dlogits, label_smoothing);
  check_targets("cross_entropy_backward", target, N, V, ignore_index);
  const double ls = label_smoothing;
  GRAFT_DISPATCH_FLOAT(logp.dtype, "cross_entropy_backward", T, [&] {
    const T* lp = logp.ptr<T>();
    const int64_t* tgt = target.ptr<int64_t>();
    const T* dl = dloss.ptr<T>();
    T* dx = dlogits.ptr<T>();
    const int64_t l0 = logp.strides[0], l1 = logp.strides[1];
    const int64_t d0 = dlogits.strides[0], d1 = dlogits.strides[1];
    for (int64_t n = 0; n < N; ++n) {
      const int64_t t = tgt[n * stride0(target)];
      const double g = t == ignore_index ? 0.0 : double(dl[n * stride0(dloss)]);
      for (int64_t v = 0; v < V; ++v) {
        const double p = std::exp(double(lp[n * l0 + v * l1]));
        dx[n * d0 + v * d1] = t == ignore_index
                                  ? T(0)
                                  : T(g * (p - (v == t ? 1 - ls : 0.0) - ls / double(V)));
      }
    }
  });
}

}  // namespace ref
}  // namespace graft::cpu
