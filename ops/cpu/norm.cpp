// Normalisation over the last dim: softmax / log_softmax and layer norm, forward and backward.
// graft::cpu: row-wise xsimd loops, OpenMP over rows for large tensors.
// graft::cpu::ref: scalar loops accumulating in double (the definition the tests check against).
//
// Shapes: x [N, C] contiguous (any leading dims fold into N rows of C); mean, rstd [N];
// gamma, beta, dgamma, dbeta [C].
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/simd.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

// Rows and row length of a tensor normalised over its last dim.
struct Rows {
  int64_t n, c;
};
Rows rows_of(const TensorView& x) {
  const int64_t c = x.rank() == 0 ? 1 : x.shape.back();
  return {c == 0 ? 0 : x.numel() / c, c};
}

template <class T> using Vec = xsimd::batch<T>;
template <class T> constexpr int64_t kW = int64_t(Vec<T>::size);

template <class T> T hmax(const Vec<T>& v) {
  alignas(64) T lanes[Vec<T>::size];
  v.store_aligned(lanes);
  return *std::max_element(lanes, lanes + Vec<T>::size);
}

template <class T> T row_max(const T* x, int64_t c) {
  Vec<T> vm(-std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + kW<T> <= c; j += kW<T>) vm = xsimd::max(vm, Vec<T>::load_unaligned(x + j));
  T m = hmax(vm);
  for (; j < c; ++j) m = std::max(m, x[j]);
  return m;
}

// sum_j f(j-th vector) for a row, with a scalar tail g(j): the shape of every row reduction here.
template <class T, class FV, class FS> T row_sum(int64_t c, FV&& fv, FS&& fs) {
  Vec<T> acc(T(0));
  int64_t j = 0;
  for (; j + kW<T> <= c; j += kW<T>) acc += fv(j);
  T s = xsimd::hadd(acc);
  for (; j < c; ++j) s += fs(j);
  return s;
}

// y[j] = fv(j) vector-wise, fs(j) on the tail.
template <class T, class FV, class FS> void row_map(T* y, int64_t c, FV&& fv, FS&& fs) {
  int64_t j = 0;
  for (; j + kW<T> <= c; j += kW<T>) fv(j).store_unaligned(y + j);
  for (; j < c; ++j) y[j] = fs(j);
}

// Runs body(row) for every row, on all threads when the tensor is large.
template <class F> void for_rows(int64_t nrows, int64_t numel, F&& body) {
#pragma omp parallel for schedule(static) if (numel >= kParallelGrain && nrows > 1)
  for (int64_t i = 0; i < nrows; ++i) body(i);
}

// ---- softmax

template <class T> void softmax_row(const T* x, T* y, int64_t c, bool log) {
  using V = Vec<T>;
  const T m = row_max(x, c);  // subtracting the max keeps exp() <= 1
  const V vm(m);
  if (log) {
    const T s = row_sum<T>(
        c, [&](int64_t j) { return xsimd::exp(V::load_unaligned(x + j) - vm); },
        [&](int64_t j) { return std::exp(x[j] - m); });
    const T lse = m + std::log(s);
    const V vl(lse);
    row_map(
        y, c, [&](int64_t j) { return V::load_unaligned(x + j) - vl; },
        [&](int64_t j) { return x[j] - lse; });
  } else {
    // y = exp(x - m) first, then scale by 1/sum (two passes over y, one over x)
    row_map(
        y, c, [&](int64_t j) { return xsimd::exp(V::load_unaligned(x + j) - vm); },
        [&](int64_t j) { return std::exp(x[j] - m); });
    const T s = row_sum<T>(
        c, [&](int64_t j) { return V::load_unaligned(y + j); }, [&](int64_t j) { return y[j]; });
    const T inv = T(1) / s;
    const V vi(inv);
    row_map(
        y, c, [&](int64_t j) { return V::load_unaligned(y + j) * vi; },
        [&](int64_t j) { return y[j] * inv; });
  }
}

template <class T>
void softmax_backward_row(const T* y, const T* dy, T* dx, int64_t c, bool log) {
  using V = Vec<T>;
  if (log) {  // dx = dy - exp(y) * sum(dy)
    const T s = row_sum<T>(
        c, [&](int64_t j) { return V::load_unaligned(dy + j); }, [&](int64_t j) { return dy[j]; });
    const V vs(s);
    row_map(
        dx, c,
        [&](int64_t j) {
          return V::load_unaligned(dy + j) - xsimd::exp(V::load_unaligned(y + j)) * vs;
        },
        [&](int64_t j) { return dy[j] - std::exp(y[j]) * s; });
  } else {  // dx = y * (dy - sum(dy * y))
    const T s = row_sum<T>(
        c, [&](int64_t j) { return V::load_unaligned(dy + j) * V::load_unaligned(y + j); },
        [&](int64_t j) { return dy[j] * y[j]; });
    const V vs(s);
    row_map(
        dx, c,
        [&](int64_t j) { return V::load_unaligned(y + j) * (V::load_unaligned(dy + j) - vs); },
        [&](int64_t j) { return y[j] * (dy[j] - s); });
  }
}

// ---- layer norm

// One row: mean, rstd (two-pass variance: no cancellation), y = xhat * gamma + beta.
template <class T, bool kGamma, bool kBeta>
void layer_norm_row(const T* x, const T* gamma, const T* beta, T eps, T* y, T* mean_out,
                    T* rstd_out, int64_t c) {
  using V = Vec<T>;
  const T mean = row_sum<T>(
                     c, [&](int64_t j) { return V::load_unaligned(x + j); },
                     [&](int64_t j) { return x[j]; }) /
                 T(c);
  const V vm(mean);
  const T var = row_sum<T>(
                    c,
                    [&](int64_t j) {
                      V d = V::load_unaligned(x + j) - vm;
                      return d * d;
                    },
                    [&](int64_t j) { return (x[j] - mean) * (x[j] - mean); }) /
                T(c);
  const T rstd = T(1) / std::sqrt(var + eps);
  *mean_out = mean;
  *rstd_out = rstd;
  const V vr(rstd);
  row_map(
      y, c,
      [&](int64_t j) {
        V v = (V::load_unaligned(x + j) - vm) * vr;
        if constexpr (kGamma) v *= V::load_unaligned(gamma + j);
        if constexpr (kBeta) v += V::load_unaligned(beta + j);
        return v;
      },
      [&](int64_t j) {
        T v = (x[j] - mean) * rstd;
        if constexpr (kGamma) v *= gamma[j];
        if constexpr (kBeta) v += beta[j];
        return v;
      });
}

template <class T, bool kGamma, bool kBeta>
void layer_norm_rows(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                     double eps, const TensorView& y, const TensorView& mean,
                     const TensorView& rstd) {
  const auto [n, c] = rows_of(x);
  const T *xp = x.ptr<T>(), *g = gamma.ptr<T>(), *b = beta.ptr<T>();
  T *yp = y.ptr<T>(), *mp = mean.ptr<T>(), *rp = rstd.ptr<T>();
  for_rows(n, n * c, [&](int64_t i) {
    layer_norm_row<T, kGamma, kBeta>(xp + i * c, g, b, T(eps), yp + i * c, mp + i, rp + i, c);
  });
}

// dx for one row, and (when the pointers are set) dgamma/dbeta partial sums added in.
// Two passes over the row: the two means, then dx and the partial sums together.
template <class T, bool kGamma>
void layer_norm_backward_row(const T* x, const T* gamma, T mean, T rstd, const T* dy, T* dx,
                             T* dg_acc, T* db_acc, int64_t c) {
  using V = Vec<T>;
  constexpr int64_t W = kW<T>;
  const V vm(mean), vr(rstd);
  auto xhat = [&](int64_t j) { return (V::load_unaligned(x + j) - vm) * vr; };
  auto dxhat = [&](int64_t j) {
    V d = V::load_unaligned(dy + j);
    if constexpr (kGamma) d *= V::load_unaligned(gamma + j);
    return d;
  };
  auto xhat_s = [&](int64_t j) { return (x[j] - mean) * rstd; };
  auto dxhat_s = [&](int64_t j) { return kGamma ? dy[j] * gamma[j] : dy[j]; };

  // m1 = mean(dxhat), m2 = mean(dxhat * xhat)
  V a1(T(0)), a2(T(0));
  int64_t j = 0;
  for (; j + W <= c; j += W) {
    const V dh = dxhat(j);
    a1 += dh;
    a2 = xsimd::fma(dh, xhat(j), a2);
  }
  T m1 = xsimd::hadd(a1), m2 = xsimd::hadd(a2);
  for (; j < c; ++j) {
    m1 += dxhat_s(j);
    m2 += dxhat_s(j) * xhat_s(j);
  }
  m1 /= T(c);
  m2 /= T(c);

  // dx = rstd * (dxhat - m1 - xhat * m2); dgamma += dy * xhat; dbeta += dy
  const V v1(m1), v2(m2);
  for (j = 0; j + W <= c; j += W) {
    const V xh = xhat(j), d = V::load_unaligned(dy + j);
    (vr * (dxhat(j) - v1 - xh * v2)).store_unaligned(dx + j);
    if (dg_acc) xsimd::fma(d, xh, V::load_unaligned(dg_acc + j)).store_unaligned(dg_acc + j);
    if (db_acc) (V::load_unaligned(db_acc + j) + d).store_unaligned(db_acc + j);
  }
  for (; j < c; ++j) {
    const T xh = xhat_s(j);
    dx[j] = rstd * (dxhat_s(j) - m1 - xh * m2);
    if (dg_acc) dg_acc[j] += dy[j] * xh;
    if (db_acc) db_acc[j] += dy[j];
  }
}

template <class T, bool kGamma>
void layer_norm_backward_rows(const TensorView& x, const TensorView& gamma,
                              const TensorView& mean, const TensorView& rstd,
                              const TensorView& dy, const TensorView& dx,
                              const TensorView& dgamma, const TensorView& dbeta) {
  const auto [n, c] = rows_of(x);
  const T *xp = x.ptr<T>(), *g = gamma.ptr<T>(), *mp = mean.ptr<T>(), *rp = rstd.ptr<T>(),
          *dyp = dy.ptr<T>();
  T* dxp = dx.ptr<T>();
  const bool want_g = dgamma.data != nullptr, want_b = dbeta.data != nullptr;
  const bool par = n * c >= kParallelGrain && n > 1;
  // dgamma/dbeta are column sums over rows: each thread sums its rows into its own slice of
  // `part` ([threads][2][C]), then the slices are added in thread order (deterministic for a
  // given thread count).
  const int threads = par ? omp_get_max_threads() : 1;
  std::vector<T> part(want_g || want_b ? size_t(threads) * 2 * c : 0, T(0));
#pragma omp parallel num_threads(threads) if (par)
  {
    T* mine = part.empty() ? nullptr : part.data() + size_t(omp_get_thread_num()) * 2 * c;
    T* dg_acc = want_g ? mine : nullptr;
    T* db_acc = want_b ? mine + c : nullptr;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      layer_norm_backward_row<T, kGamma>(xp + i * c, g, mp[i], rp[i], dyp + i * c, dxp + i * c,
                                         dg_acc, db_acc, c);
  }
  if (part.empty()) return;
  for (int64_t j = 0; j < c; ++j) {
    T sg = 0, sb = 0;
    for (int t = 0; t < threads; ++t) {
      sg += part[size_t(t) * 2 * c + j];
      sb += part[size_t(t) * 2 * c + c + j];
    }
    if (want_g) dgamma.ptr<T>()[j] = sg;
    if (want_b) dbeta.ptr<T>()[j] = sb;
  }
}

// The callers (autograd) make these views contiguous; a strided one here is a bug upstream.
void check_layout(const TensorView& x, const char* op) {
  GRAFT_CHECK(x.is_contiguous(), "{}: internal error: expected a contiguous tensor, got strides {}",
              op, x.strides.str());
}

}  // namespace

void softmax(const TensorView& x, const TensorView& y, bool log) {
  check_layout(x, "softmax");
  check_layout(y, "softmax");
  GRAFT_DISPATCH_FLOAT(x.dtype, "softmax", T, [&] {
    const auto [n, c] = rows_of(x);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    for_rows(n, n * c, [&](int64_t i) { softmax_row(xp + i * c, yp + i * c, c, log); });
  });
}

void softmax_backward(const TensorView& y, const TensorView& dy, const TensorView& dx, bool log) {
  check_layout(y, "softmax_backward");
  check_layout(dy, "softmax_backward");
  check_layout(dx, "softmax_backward");
  GRAFT_DISPATCH_FLOAT(y.dtype, "softmax_backward", T, [&] {
    const auto [n, c] = rows_of(y);
    const T *yp = y.ptr<T>(), *dyp = dy.ptr<T>();
    T* dxp = dx.ptr<T>();
    for_rows(n, n * c, [&](int64_t i) {
      softmax_backward_row(yp + i * c, dyp + i * c, dxp + i * c, c, log);
    });
  });
}

void layer_norm(const TensorView& x, const TensorView& gamma, const TensorView& beta, double eps,
                const TensorView& y, const TensorView& mean, const TensorView& rstd) {
  check_layout(x, "layer_norm");
  check_layout(y, "layer_norm");
  GRAFT_ASSERT(mean.dtype == x.dtype && rstd.dtype == x.dtype);
  GRAFT_DISPATCH_FLOAT(x.dtype, "layer_norm", T, [&] {
    const bool g = gamma.data != nullptr, b = beta.data != nullptr;
    if (g && b) layer_norm_rows<T, true, true>(x, gamma, beta, eps, y, mean, rstd);
    else if (g) layer_norm_rows<T, true, false>(x, gamma, beta, eps, y, mean, rstd);
    else if (b) layer_norm_rows<T, false, true>(x, gamma, beta, eps, y, mean, rstd);
    else layer_norm_rows<T, false, false>(x, gamma, beta, eps, y, mean, rstd);
  });
}

void layer_norm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                         const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                         const TensorView& dgamma, const TensorView& dbeta) {
  check_layout(x, "layer_norm_backward");
  check_layout(dy, "layer_norm_backward");
  check_layout(dx, "layer_norm_backward");
  GRAFT_ASSERT(mean.dtype == x.dtype && rstd.dtype == x.dtype);
  GRAFT_DISPATCH_FLOAT(x.dtype, "layer_norm_backward", T, [&] {
    if (gamma.data)
      layer_norm_backward_rows<T, true>(x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
    else
      layer_norm_backward_rows<T, false>(x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
  });
}

// ------------------------------------------------------------------------------------------
// Reference kernels: one row at a time, straight from the formulas, sums in double.
namespace ref {
namespace {

template <class T> void ref_softmax(const TensorView& x, const TensorView& y, bool log) {
  const auto [n, c] = rows_of(x);
  for (int64_t i = 0; i < n; ++i) {
    const T* xr = x.ptr<T>() + i * c;
    T* yr = y.ptr<T>() + i * c;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c; ++j) m = std::max(m, double(xr[j]));
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(double(xr[j]) - m);
    for (int64_t j = 0; j < c; ++j)
      yr[j] = T(log ? double(xr[j]) - m - std::log(s) : std::exp(double(xr[j]) - m) / s);
  }
}

template <class T>
void ref_softmax_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                          bool log) {
  const auto [n, c] = rows_of(y);
  for (int64_t i = 0; i < n; ++i) {
    const T *yr = y.ptr<T>() + i * c, *dyr = dy.ptr<T>() + i * c;
    T* dxr = dx.ptr<T>() + i * c;
    double s = 0;  // log: sum(dy); softmax: sum(dy * y)
    for (int64_t j = 0; j < c; ++j) s += log ? double(dyr[j]) : double(dyr[j]) * double(yr[j]);
    for (int64_t j = 0; j < c; ++j)
      dxr[j] = T(log ? double(dyr[j]) - std::exp(double(yr[j])) * s
                     : double(yr[j]) * (double(dyr[j]) - s));
  }
}

template <class T>
void ref_layer_norm(const TensorView& x, const TensorView& gamma, const TensorView& beta,
                    double eps, const TensorView& y, const TensorView& mean,
                    const TensorView& rstd) {
  const auto [n, c] = rows_of(x);
  for (int64_t i = 0; i < n; ++i) {
    const T* xr = x.ptr<T>() + i * c;
    double mu = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mu += double(xr[j]);
    mu /= double(c);
    for (int64_t j = 0; j < c; ++j) var += (double(xr[j]) - mu) * (double(xr[j]) - mu);
    var /= double(c);  // biased variance, as in PyTorch's layer_norm
    const double rs = 1.0 / std::sqrt(var + eps);
    mean.ptr<T>()[i] = T(mu);
    rstd.ptr<T>()[i] = T(rs);
    for (int64_t j = 0; j < c; ++j) {
      double v = (double(xr[j]) - mu) * rs;
      if (gamma.data) v *= double(gamma.ptr<T>()[j]);
      if (beta.data) v += double(beta.ptr<T>()[j]);
      y.ptr<T>()[i * c + j] = T(v);
    }
  }
}

template <class T>
void ref_layer_norm_backward(const TensorView& x, const TensorView& gamma,
                             const TensorView& mean, const TensorView& rstd,
                             const TensorView& dy, const TensorView& dx,
                             const TensorView& dgamma, const TensorView& dbeta) {
  const auto [n, c] = rows_of(x);
  std::vector<double> dg(size_t(c), 0.0), db(size_t(c), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const T *xr = x.ptr<T>() + i * c, *dyr = dy.ptr<T>() + i * c;
    const double mu = double(mean.ptr<T>()[i]), rs = double(rstd.ptr<T>()[i]);
    auto xhat = [&](int64_t j) { return (double(xr[j]) - mu) * rs; };
    auto dxhat = [&](int64_t j) {
      return double(dyr[j]) * (gamma.data ? double(gamma.ptr<T>()[j]) : 1.0);
    };
    double m1 = 0, m2 = 0;  // mean(dxhat), mean(dxhat * xhat)
    for (int64_t j = 0; j < c; ++j) {
      m1 += dxhat(j);
      m2 += dxhat(j) * xhat(j);
    }
    m1 /= double(c);
    m2 /= double(c);
    for (int64_t j = 0; j < c; ++j) {
      dx.ptr<T>()[i * c + j] = T(rs * (dxhat(j) - m1 - xhat(j) * m2));
      dg[j] += double(dyr[j]) * xhat(j);
      db[j] += double(dyr[j]);
    }
  }
  for (int64_t j = 0; j < c; ++j) {
    if (dgamma.data) dgamma.ptr<T>()[j] = T(dg[j]);
    if (dbeta.data) dbeta.ptr<T>()[j] = T(db[j]);
  }
}

}  // namespace

void softmax(const TensorView& x, const TensorView& y, bool log) {
  GRAFT_DISPATCH_FLOAT(x.dtype, "softmax", T, [&] { ref_softmax<T>(x, y, log); });
}
void softmax_backward(const TensorView& y, const TensorView& dy, const TensorView& dx, bool log) {
  GRAFT_DISPATCH_FLOAT(y.dtype, "softmax_backward", T,
                       [&] { ref_softmax_backward<T>(y, dy, dx, log); });
}
void layer_norm(const TensorView& x, const TensorView& gamma, const TensorView& beta, double eps,
                const TensorView& y, const TensorView& mean, const TensorView& rstd) {
  GRAFT_DISPATCH_FLOAT(x.dtype, "layer_norm", T,
                       [&] { ref_layer_norm<T>(x, gamma, beta, eps, y, mean, rstd); });
}
void layer_norm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean,
                         const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                         const TensorView& dgamma, const TensorView& dbeta) {
  GRAFT_DISPATCH_FLOAT(x.dtype, "layer_norm_backward", T, [&] {
    ref_layer_norm_backward<T>(x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
  });
}

}  // namespace ref
}  // namespace graft::cpu
