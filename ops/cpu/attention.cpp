// Fused scaled dot-product attention, forward and backward, without the [B, H, T, S] score
// matrix: each (b, h) walks its queries in small row tiles and its keys in blocks, keeping a
// running max m, a running sum l and an unnormalised output acc per row (the online softmax):
//
//   s_j = scale q.k_j + mask_j          (-inf where masked or j > i + causal_offset)
//   m' = max(m, max_j s_j);  l = l e^(m - m') + sum_j e^(s_j - m');  acc = acc e^(m - m') + sum_j p'_j v_j
//   out = acc / l,  lse = m + log l     (a row with every key masked: out = 0, lse = +inf)
//
// with p'_j = e^(s_j - m') keep_j / (1 - p) under attention dropout (keep_j from Philox, so the
// backward regenerates the same mask). The backward recomputes P = exp(S - lse) block by block
// (FlashAttention-2's recomputation; only lse is saved):
//
//   dV_j += p'_ij dO_i;  dP'_ij = dO_i.v_j;  dS_ij = p_ij (dP'_ij keep_ij / (1 - p) - dO_i.O_i)
//   dQ_i += scale dS_ij k_j;  dK_j += scale dS_ij q_i
//
// graft::cpu: xsimd over keys (K and V transposed per (b, h) so scores vectorise over j) and over
// the head dim, register-blocked (4 query rows x 4 vectors per pass), dropout keep draws by a
// structure-of-arrays Philox over a row of keys; OpenMP over (b, h). graft::cpu::ref: plain
// loops over full rows in double.
// Shapes: q [B, H, T, D], k [B, H, S, D], v [B, H, S, E], out [B, H, T, E], lse [B, H, T]; all
// contiguous; mask a [B, H, T, S] view with broadcast strides (data == nullptr: none).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/philox_lanes.h"
#include "ops/cpu/simd.h"
#include "ops/error.h"
#include "ops/random.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

struct Dims {
  int64_t B, H, T, S, D, E;
};
Dims dims_of(const TensorView& q, const TensorView& k, const TensorView& v) {
  return {q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
}

void check_args(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                const TensorView& mask) {
  GRAFT_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4,
              "{}: expected q, k, v of rank 4 ([B, H, T, D]), got ranks {}, {}, {}", op, q.rank(),
              k.rank(), v.rank());
  GRAFT_CHECK(is_floating(q.dtype) && q.dtype == k.dtype && q.dtype == v.dtype,
              "{}: q, k, v must share one floating dtype, got {}, {}, {}", op, q.dtype, k.dtype,
              v.dtype);
  GRAFT_CHECK(mask.data == nullptr || (mask.dtype == q.dtype && mask.rank() == 4),
              "{}: the additive mask must be a rank-4 view of dtype {}", op, q.dtype);
}

// The Philox draw deciding whether score (n, i, j) survives dropout.
inline bool keep(const AttentionArgs& a, int64_t n, int64_t i, int64_t j, const Dims& d) {
  const uint64_t idx = uint64_t((n * d.T + i) * d.S + j);
  return philox_uniform(a.seed, a.offset + idx) >= a.dropout_p;
}

// The mask value for (b, h, i, j), 0 when there is no mask.
template <class T>
inline T mask_at(const TensorView& m, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (m.data == nullptr) return T(0);
  return m.ptr<T>()[b * m.strides[0] + h * m.strides[1] + i * m.strides[2] + j * m.strides[3]];
}
// The address of mask element (b, h, i, j); m.data must be set.
template <class T>
inline const T* mask_ptr(const TensorView& m, int64_t b, int64_t h, int64_t i, int64_t j) {
  return m.ptr<T>() + b * m.strides[0] + h * m.strides[1] + i * m.strides[2] + j * m.strides[3];
}

inline bool visible(const AttentionArgs& a, int64_t i, int64_t j) {
  return !a.causal || j <= i + a.causal_offset;
}

// ================================================================ reference (double, full rows)

template <class T>
void ref_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                 const TensorView& mask, const AttentionArgs& a, const TensorView& out,
                 const TensorView& lse) {
  const Dims d = dims_of(q, k, v);
  const T *qp = q.ptr<T>(), *kp = k.ptr<T>(), *vp = v.ptr<T>();
  T *op = out.ptr<T>(), *lp = lse.ptr<T>();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> s(size_t(d.S)), acc(size_t(d.E));
  for (int64_t n = 0; n < d.B * d.H; ++n) {
    const int64_t b = n / d.H, h = n % d.H;
    for (int64_t i = 0; i < d.T; ++i) {
      const T* qi = qp + (n * d.T + i) * d.D;
      double m = -inf;
      for (int64_t j = 0; j < d.S; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d.D; ++c) dot += double(qi[c]) * double(kp[(n * d.S + j) * d.D + c]);
        s[j] = visible(a, i, j) ? a.scale * dot + double(mask_at<T>(mask, b, h, i, j)) : -inf;
        m = std::max(m, s[j]);
      }
      T* oi = op + (n * d.T + i) * d.E;
      if (m == -inf) {  // every key masked: zeros, and lse = +inf makes every p 0 in backward
        std::fill(oi, oi + d.E, T(0));
        lp[n * d.T + i] = T(inf);
        continue;
      }
      double l = 0;
      for (int64_t j = 0; j < d.S; ++j) l += std::exp(s[j] - m);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < d.S; ++j) {
        double p = std::exp(s[j] - m) / l;
        if (a.dropout_p > 0) p = keep(a, n, i, j, d) ? p / (1 - a.dropout_p) : 0.0;
        for (int64_t e = 0; e < d.E; ++e) acc[e] += p * double(vp[(n * d.S + j) * d.E + e]);
      }
      for (int64_t e = 0; e < d.E; ++e) oi[e] = T(acc[e]);
      lp[n * d.T + i] = T(m + std::log(l));
    }
  }
}

template <class T>
void ref_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                  const TensorView& mask, const AttentionArgs& a, const TensorView& out,
                  const TensorView& lse, const TensorView& dout, const TensorView& dq,
                  const TensorView& dk, const TensorView& dv) {
  const Dims d = dims_of(q, k, v);
  const T *qp = q.ptr<T>(), *kp = k.ptr<T>(), *vp = v.ptr<T>(), *op = out.ptr<T>();
  const T *lp = lse.ptr<T>(), *gp = dout.ptr<T>();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> gq(size_t(d.D)), gk(size_t(d.S * d.D)), gv(size_t(d.S * d.E));
  for (int64_t n = 0; n < d.B * d.H; ++n) {
    const int64_t b = n / d.H, h = n % d.H;
    std::fill(gk.begin(), gk.end(), 0.0);
    std::fill(gv.begin(), gv.end(), 0.0);
    for (int64_t i = 0; i < d.T; ++i) {
      const T *qi = qp + (n * d.T + i) * d.D, *gi = gp + (n * d.T + i) * d.E;
      const T* oi = op + (n * d.T + i) * d.E;
      const double li = double(lp[n * d.T + i]);
      double delta = 0;  // dO_i . O_i = sum_j p_ij dP_ij
      for (int64_t e = 0; e < d.E; ++e) delta += double(gi[e]) * double(oi[e]);
      std::fill(gq.begin(), gq.end(), 0.0);
      for (int64_t j = 0; j < d.S; ++j) {
        if (!visible(a, i, j) || li == inf) continue;
        const T *kj = kp + (n * d.S + j) * d.D, *vj = vp + (n * d.S + j) * d.E;
        double dot = 0;
        for (int64_t c = 0; c < d.D; ++c) dot += double(qi[c]) * double(kj[c]);
        const double p = std::exp(a.scale * dot + double(mask_at<T>(mask, b, h, i, j)) - li);
        double kf = 1.0;  // keep_j / (1 - p)
        if (a.dropout_p > 0) kf = keep(a, n, i, j, d) ? 1.0 / (1 - a.dropout_p) : 0.0;
        double dpd = 0;  // dP'_ij = dO_i . v_j
        for (int64_t e = 0; e < d.E; ++e) dpd += double(gi[e]) * double(vj[e]);
        const double ds = p * (dpd * kf - delta);
        for (int64_t e = 0; e < d.E; ++e) gv[j * d.E + e] += p * kf * double(gi[e]);
        for (int64_t c = 0; c < d.D; ++c) {
          gq[c] += a.scale * ds * double(kj[c]);
          gk[j * d.D + c] += a.scale * ds * double(qi[c]);
        }
      }
      for (int64_t c = 0; c < d.D; ++c) dq.ptr<T>()[(n * d.T + i) * d.D + c] = T(gq[c]);
    }
    for (int64_t x = 0; x < d.S * d.D; ++x) dk.ptr<T>()[n * d.S * d.D + x] = T(gk[x]);
    for (int64_t x = 0; x < d.S * d.E; ++x) dv.ptr<T>()[n * d.S * d.E + x] = T(gv[x]);
  }
}

// ================================================================ fast (xsimd + OpenMP, tiled)

template <class T> using Vec = xsimd::batch<T>;
template <class T> constexpr int64_t kW = int64_t(Vec<T>::size);
constexpr int64_t kRows = 4;     // query rows per tile (register blocking)
constexpr int64_t kBlock = 128;  // keys per block

template <class T> inline T dot(const T* x, const T* y, int64_t n) {
  Vec<T> acc(T(0));
  int64_t c = 0;
  for (; c + kW<T> <= n; c += kW<T>)
    acc = xsimd::fma(Vec<T>::load_unaligned(x + c), Vec<T>::load_unaligned(y + c), acc);
  T s = xsimd::hadd(acc);
  for (; c < n; ++c) s += x[c] * y[c];
  return s;
}

constexpr int64_t kNV = 4;  // vectors of the head dim (or of keys) kept in registers at once

// y_r[0..n) += sum_jj a[r][jj] * x[jj * ldx + (0..n)] for r < kRows, jj < nj: the P V and
// dS K products of a tile. kNV vectors of y for all kRows rows stay in registers over the keys
// (per key: kRows broadcasts and kNV loads feed kRows kNV FMAs); the sum order per element is
// the same as one vector at a time.
template <class T>
void tile_gemm_rows(T* const* y, const T (*a)[kBlock], const T* x, int64_t ldx, int64_t nj,
                    int64_t n) {
  using V = Vec<T>;
  int64_t c = 0;
  for (; c + kNV * kW<T> <= n; c += kNV * kW<T>) {
    V acc[kRows][kNV];
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t u = 0; u < kNV; ++u) acc[r][u] = V::load_unaligned(y[r] + c + u * kW<T>);
    for (int64_t jj = 0; jj < nj; ++jj) {
      V xv[kNV];
      for (int64_t u = 0; u < kNV; ++u) xv[u] = V::load_unaligned(x + jj * ldx + c + u * kW<T>);
      for (int64_t r = 0; r < kRows; ++r) {
        const V ar(a[r][jj]);
        for (int64_t u = 0; u < kNV; ++u) acc[r][u] = xsimd::fma(ar, xv[u], acc[r][u]);
      }
    }
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t u = 0; u < kNV; ++u) acc[r][u].store_unaligned(y[r] + c + u * kW<T>);
  }
  for (; c + kW<T> <= n; c += kW<T>) {
    V acc[kRows];
    for (int64_t r = 0; r < kRows; ++r) acc[r] = V::load_unaligned(y[r] + c);
    for (int64_t jj = 0; jj < nj; ++jj) {
      const V xv = V::load_unaligned(x + jj * ldx + c);
      for (int64_t r = 0; r < kRows; ++r) acc[r] = xsimd::fma(V(a[r][jj]), xv, acc[r]);
    }
    for (int64_t r = 0; r < kRows; ++r) acc[r].store_unaligned(y[r] + c);
  }
  for (; c < n; ++c)
    for (int64_t r = 0; r < kRows; ++r) {
      T t = y[r][c];
      for (int64_t jj = 0; jj < nj; ++jj) t += a[r][jj] * x[jj * ldx + c];
      y[r][c] = t;
    }
}

// y_jj[0..n) += sum_r a[r][jj] * x_r[0..n) for jj < nj (y_jj = y + jj * ldy): the dK and dV
// products, one pass over each key row for all kRows query rows. kNV vectors of every x_r stay
// in registers over the keys (same per-element sum order as one vector at a time).
template <class T>
void tile_gemm_keys(T* y, int64_t ldy, const T (*a)[kBlock], const T* const* x, int64_t nj,
                    int64_t n) {
  using V = Vec<T>;
  bool any[kBlock];  // false: key jj is masked for every row of the tile
  for (int64_t jj = 0; jj < nj; ++jj) {
    any[jj] = false;
    for (int64_t r = 0; r < kRows; ++r) any[jj] |= a[r][jj] != T(0);
  }
  int64_t c = 0;
  for (; c + kNV * kW<T> <= n; c += kNV * kW<T>) {
    V xv[kRows][kNV];
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t u = 0; u < kNV; ++u) xv[r][u] = V::load_unaligned(x[r] + c + u * kW<T>);
    for (int64_t jj = 0; jj < nj; ++jj) {
      if (!any[jj]) continue;
      T* yj = y + jj * ldy + c;
      V acc[kNV];
      for (int64_t u = 0; u < kNV; ++u) acc[u] = V::load_unaligned(yj + u * kW<T>);
      for (int64_t r = 0; r < kRows; ++r) {
        const V ar(a[r][jj]);
        for (int64_t u = 0; u < kNV; ++u) acc[u] = xsimd::fma(ar, xv[r][u], acc[u]);
      }
      for (int64_t u = 0; u < kNV; ++u) acc[u].store_unaligned(yj + u * kW<T>);
    }
  }
  for (int64_t jj = 0; jj < nj; ++jj) {
    if (!any[jj]) continue;
    T* yj = y + jj * ldy;
    int64_t cc = c;
    for (; cc + kW<T> <= n; cc += kW<T>) {
      V acc = V::load_unaligned(yj + cc);
      for (int64_t r = 0; r < kRows; ++r) acc = xsimd::fma(V(a[r][jj]), V::load_unaligned(x[r] + cc), acc);
      acc.store_unaligned(yj + cc);
    }
    for (; cc < n; ++cc)
      for (int64_t r = 0; r < kRows; ++r) yj[cc] += a[r][jj] * x[r][cc];
  }
}

// xt[c * Sp + j] = x[j * C + c], zero-padded to Sp (a multiple of the vector width) keys.
template <class T> void transpose_into(const T* x, int64_t S, int64_t C, int64_t Sp, T* xt) {
  for (int64_t c = 0; c < C; ++c) {
    T* row = xt + c * Sp;
    for (int64_t j = 0; j < S; ++j) row[j] = x[j * C + c];
    for (int64_t j = S; j < Sp; ++j) row[j] = T(0);
  }
}

// s[r][jj] = sum_c a[r][c] * bt[c][j0 + jj] for nr rows, jj in [0, nj) (nj padded to a vector
// multiple): register-blocked over the rows, vectorised over keys.
template <class T>
void tile_dots(const T* const* a, int64_t nr, const T* bt, int64_t Sp, int64_t C, int64_t j0,
               int64_t nj, T (*s)[kBlock]) {
  using V = Vec<T>;
  int64_t jj = 0;
  if (nr == kRows)  // kNV key vectors at once: per c, kNV loads and kRows broadcasts
    for (; jj + kNV * kW<T> <= nj; jj += kNV * kW<T>) {
      V acc[kRows][kNV];
      for (int64_t r = 0; r < kRows; ++r)
        for (int64_t u = 0; u < kNV; ++u) acc[r][u] = V(T(0));
      const T* col = bt + j0 + jj;
      for (int64_t c = 0; c < C; ++c) {
        V bv[kNV];
        for (int64_t u = 0; u < kNV; ++u) bv[u] = V::load_unaligned(col + c * Sp + u * kW<T>);
        for (int64_t r = 0; r < kRows; ++r) {
          const V ar(a[r][c]);
          for (int64_t u = 0; u < kNV; ++u) acc[r][u] = xsimd::fma(ar, bv[u], acc[r][u]);
        }
      }
      for (int64_t r = 0; r < kRows; ++r)
        for (int64_t u = 0; u < kNV; ++u) acc[r][u].store_unaligned(s[r] + jj + u * kW<T>);
    }
  for (; jj < nj; jj += kW<T>) {
    V acc[kRows];
    for (int64_t r = 0; r < kRows; ++r) acc[r] = V(T(0));
    const T* col = bt + j0 + jj;
    if (nr == kRows) {
      for (int64_t c = 0; c < C; ++c) {
        const V bv = V::load_unaligned(col + c * Sp);
        for (int64_t r = 0; r < kRows; ++r) acc[r] = xsimd::fma(V(a[r][c]), bv, acc[r]);
      }
    } else {
      for (int64_t c = 0; c < C; ++c) {
        const V bv = V::load_unaligned(col + c * Sp);
        for (int64_t r = 0; r < nr; ++r) acc[r] = xsimd::fma(V(a[r][c]), bv, acc[r]);
      }
    }
    for (int64_t r = 0; r < nr; ++r) acc[r].store_unaligned(s[r] + jj);
  }
}

// Scores of one tile: scale q.k + mask, -inf where invisible (or past S).
template <class T>
void tile_scores(const T* const* qs, int64_t nr, const T* kt, int64_t Sp, const Dims& d,
                 int64_t j0, int64_t nj, const TensorView& mask, const AttentionArgs& a, int64_t b,
                 int64_t h, int64_t i0, T (*s)[kBlock]) {
  const int64_t njv = (nj + kW<T> - 1) / kW<T> * kW<T>;
  tile_dots(qs, nr, kt, Sp, d.D, j0, njv, s);  // qs already carry the scale
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < nr; ++r) {
    if (mask.data && mask.strides[3] == 1) {  // a contiguous mask row: a plain (vectorised) add
      const T* mrow = mask_ptr<T>(mask, b, h, i0 + r, j0);
      for (int64_t jj = 0; jj < nj; ++jj) s[r][jj] += mrow[jj];
      if (a.causal)
        for (int64_t jj = 0; jj < nj; ++jj)
          if (!visible(a, i0 + r, j0 + jj)) s[r][jj] = ninf;
    } else {
      for (int64_t jj = 0; jj < nj; ++jj) {
        const int64_t j = j0 + jj;
        if (!visible(a, i0 + r, j)) s[r][jj] = ninf;
        else if (mask.data) s[r][jj] += mask_at<T>(mask, b, h, i0 + r, j);
      }
    }
    for (int64_t jj = nj; jj < njv; ++jj) s[r][jj] = ninf;
  }
}

// The last key (exclusive) any row of the tile [i0, i0 + nr) can see.
inline int64_t key_end(const AttentionArgs& a, int64_t i0, int64_t nr, int64_t S) {
  if (!a.causal) return S;
  return std::clamp<int64_t>(i0 + nr - 1 + a.causal_offset + 1, 0, S);
}

// f[jj] = keep(n, i, j0 + jj) / (1 - p), or 0, for jj < nj: Philox-4x32-10 over the keys of the
// block (ops/cpu/philox_lanes.h). keep() in integer form: with u = bits 2^-53,
// u >= p <=> bits >= ceil(p 2^53).
template <class T>
void keep_factors(const AttentionArgs& a, uint64_t idx0, int64_t nj, T kf, T* f) {
  alignas(64) uint32_t c0[kBlock], c1[kBlock];
  philox_lanes<kBlock>(a.offset + idx0, a.seed, nj, c0, c1);
  const uint64_t thr = uint64_t(std::ceil(a.dropout_p * 9007199254740992.0));
#pragma omp simd
  for (int64_t jj = 0; jj < nj; ++jj) {
    const uint64_t bits = ((uint64_t(c0[jj]) << 21) ^ uint64_t(c1[jj])) & ((uint64_t(1) << 53) - 1);
    f[jj] = bits >= thr ? kf : T(0);
  }
}

template <class T> struct Scratch {
  std::vector<T> kt, vt, qs, dq_pad;
};

template <class T>
void fast_forward(const TensorView& q, const TensorView& k, const TensorView& v,
                  const TensorView& mask, const AttentionArgs& a, const TensorView& out,
                  const TensorView& lse) {
  using V = Vec<T>;
  const Dims d = dims_of(q, k, v);
  const int64_t Sp = (d.S + kW<T> - 1) / kW<T> * kW<T>;  // keys padded to whole vectors
  const T *qp = q.ptr<T>(), *kp = k.ptr<T>(), *vp = v.ptr<T>();
  T *op = out.ptr<T>(), *lp = lse.ptr<T>();
  const T ninf = -std::numeric_limits<T>::infinity();
  const T kf = a.dropout_p > 0 ? T(1.0 / (1.0 - a.dropout_p)) : T(1);
  const int64_t work = d.B * d.H * d.T * d.S * (d.D + d.E);
#pragma omp parallel if (work >= 4 * kParallelGrain && d.B * d.H > 1)
  {
    Scratch<T> sc;
    sc.kt.resize(size_t(d.D * Sp));
    sc.qs.resize(size_t(kRows * d.D));
    std::vector<T> acc(size_t(kRows * d.E));
    alignas(64) T s[kRows][kBlock];
    alignas(64) T f[kBlock];
#pragma omp for schedule(dynamic, 1)
    for (int64_t n = 0; n < d.B * d.H; ++n) {
      const int64_t b = n / d.H, h = n % d.H;
      const T* kn = kp + n * d.S * d.D;
      const T* vn = vp + n * d.S * d.E;
      transpose_into(kn, d.S, d.D, Sp, sc.kt.data());
      for (int64_t i0 = 0; i0 < d.T; i0 += kRows) {
        const int64_t nr = std::min(kRows, d.T - i0);
        const T* qrows[kRows];
        for (int64_t r = 0; r < nr; ++r) {
          const T* qi = qp + (n * d.T + i0 + r) * d.D;
          T* dst = sc.qs.data() + r * d.D;
          for (int64_t c = 0; c < d.D; ++c) dst[c] = qi[c] * T(a.scale);
          qrows[r] = dst;
        }
        T m[kRows], l[kRows];
        std::fill(m, m + kRows, ninf);
        std::fill(l, l + kRows, T(0));
        std::fill(acc.begin(), acc.end(), T(0));
        const int64_t jend = key_end(a, i0, nr, d.S);
        for (int64_t j0 = 0; j0 < jend; j0 += kBlock) {
          const int64_t nj = std::min(kBlock, jend - j0);
          const int64_t njv = (nj + kW<T> - 1) / kW<T> * kW<T>;
          tile_scores(qrows, nr, sc.kt.data(), Sp, d, j0, nj, mask, a, b, h, i0, s);
          for (int64_t r = 0; r < nr; ++r) {
            V vm(m[r]);
            for (int64_t jj = 0; jj < njv; jj += kW<T>) vm = xsimd::max(vm, V::load_aligned(s[r] + jj));
            alignas(64) T lanes[kW<T>];
            vm.store_aligned(lanes);
            const T mnew = *std::max_element(lanes, lanes + kW<T>);
            if (mnew == ninf) continue;  // nothing visible yet
            const T alpha = std::exp(m[r] - mnew);  // e^(m - m'), 0 when m = -inf
            V vsum(T(0));
            const V vmn(mnew);
            for (int64_t jj = 0; jj < njv; jj += kW<T>) {
              V p = xsimd::exp(V::load_aligned(s[r] + jj) - vmn);
              vsum += p;
              p.store_aligned(s[r] + jj);
            }
            l[r] = l[r] * alpha + xsimd::hadd(vsum);
            m[r] = mnew;
            T* ar = acc.data() + r * d.E;
            if (alpha != T(1))
              for (int64_t e = 0; e < d.E; ++e) ar[e] *= alpha;
            if (a.dropout_p > 0) {  // p' = p keep / (1 - p); l above sums the undropped p
              keep_factors(a, uint64_t((n * d.T + i0 + r) * d.S + j0), nj, kf, f);
              for (int64_t jj = 0; jj < nj; ++jj) s[r][jj] *= f[jj];
            }
          }
          for (int64_t r = 0; r < kRows; ++r)  // rows past the tile or with nothing visible add 0
            if (r >= nr || m[r] == ninf) std::fill(s[r], s[r] + nj, T(0));
          T* arows[kRows];
          for (int64_t r = 0; r < kRows; ++r) arows[r] = acc.data() + r * d.E;
          tile_gemm_rows(arows, s, vn + j0 * d.E, d.E, nj, d.E);  // acc_r += sum_j p'_rj v_j
        }
        for (int64_t r = 0; r < nr; ++r) {
          T* oi = op + (n * d.T + i0 + r) * d.E;
          const T* ar = acc.data() + r * d.E;
          if (l[r] == T(0)) {  // every key masked
            std::fill(oi, oi + d.E, T(0));
            lp[n * d.T + i0 + r] = std::numeric_limits<T>::infinity();
            continue;
          }
          const T inv = T(1) / l[r];
          for (int64_t e = 0; e < d.E; ++e) oi[e] = ar[e] * inv;
          lp[n * d.T + i0 + r] = m[r] + std::log(l[r]);
        }
      }
    }
  }
}

template <class T>
void fast_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                   const TensorView& mask, const AttentionArgs& a, const TensorView& out,
                   const TensorView& lse, const TensorView& dout, const TensorView& dq,
                   const TensorView& dk, const TensorView& dv) {
  using V = Vec<T>;
  const Dims d = dims_of(q, k, v);
  const int64_t Sp = (d.S + kW<T> - 1) / kW<T> * kW<T>;  // keys padded to whole vectors
  const T *qp = q.ptr<T>(), *kp = k.ptr<T>(), *vp = v.ptr<T>(), *op = out.ptr<T>();
  const T *lp = lse.ptr<T>(), *gp = dout.ptr<T>();
  T *dqp = dq.ptr<T>(), *dkp = dk.ptr<T>(), *dvp = dv.ptr<T>();
  const T kf = a.dropout_p > 0 ? T(1.0 / (1.0 - a.dropout_p)) : T(1);
  const T scale = T(a.scale);
  const int64_t work = d.B * d.H * d.T * d.S * (d.D + d.E);
#pragma omp parallel if (work >= 4 * kParallelGrain && d.B * d.H > 1)
  {
    Scratch<T> sc;
    sc.kt.resize(size_t(d.D * Sp));
    sc.vt.resize(size_t(d.E * Sp));
    sc.qs.resize(size_t(kRows * d.D));
    sc.dq_pad.resize(size_t(d.D));
    alignas(64) T s[kRows][kBlock];
    alignas(64) T dp[kRows][kBlock];
    alignas(64) T f[kBlock];
    std::fill(f, f + kBlock, kf);
#pragma omp for schedule(dynamic, 1)
    for (int64_t n = 0; n < d.B * d.H; ++n) {
      const int64_t b = n / d.H, h = n % d.H;
      const T *kn = kp + n * d.S * d.D, *vn = vp + n * d.S * d.E;
      T *dkn = dkp + n * d.S * d.D, *dvn = dvp + n * d.S * d.E;
      std::fill(dkn, dkn + d.S * d.D, T(0));
      std::fill(dvn, dvn + d.S * d.E, T(0));
      transpose_into(kn, d.S, d.D, Sp, sc.kt.data());
      transpose_into(vn, d.S, d.E, Sp, sc.vt.data());
      for (int64_t i0 = 0; i0 < d.T; i0 += kRows) {
        const int64_t nr = std::min(kRows, d.T - i0);
        const T *qrows[kRows], *grows[kRows];
        T* dqrows[kRows];
        T delta[kRows], li[kRows];
        for (int64_t r = nr; r < kRows; ++r) {  // padding rows: valid pointers, zero weights
          qrows[r] = sc.qs.data();
          grows[r] = gp + (n * d.T + i0) * d.E;
          dqrows[r] = sc.dq_pad.data();
        }
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t row = n * d.T + i0 + r;
          const T* qi = qp + row * d.D;
          T* dst = sc.qs.data() + r * d.D;
          for (int64_t c = 0; c < d.D; ++c) dst[c] = qi[c] * scale;
          qrows[r] = dst;
          grows[r] = gp + row * d.E;
          delta[r] = dot(grows[r], op + row * d.E, d.E);  // dO_i . O_i
          li[r] = lp[row];
          std::fill(dqp + row * d.D, dqp + (row + 1) * d.D, T(0));
          dqrows[r] = dqp + row * d.D;
        }
        const int64_t jend = key_end(a, i0, nr, d.S);
        for (int64_t j0 = 0; j0 < jend; j0 += kBlock) {
          const int64_t nj = std::min(kBlock, jend - j0);
          const int64_t njv = (nj + kW<T> - 1) / kW<T> * kW<T>;
          tile_scores(qrows, nr, sc.kt.data(), Sp, d, j0, nj, mask, a, b, h, i0, s);
          tile_dots(grows, nr, sc.vt.data(), Sp, d.E, j0, njv, dp);  // dP'_ij = dO_i . v_j
          for (int64_t r = 0; r < kRows; ++r) {
            if (r >= nr) {  // rows past the tile contribute nothing
              std::fill(s[r], s[r] + nj, T(0));
              std::fill(dp[r], dp[r] + nj, T(0));
              continue;
            }
            const V vl(li[r]);  // p = exp(s - lse): 0 for masked keys and dead rows (lse = inf)
            for (int64_t jj = 0; jj < njv; jj += kW<T>)
              xsimd::exp(V::load_aligned(s[r] + jj) - vl).store_aligned(s[r] + jj);
            if (a.dropout_p > 0)  // f_j = keep_j / (1 - p)
              keep_factors(a, uint64_t((n * d.T + i0 + r) * d.S + j0), nj, kf, f);
            for (int64_t jj = 0; jj < nj; ++jj) {  // p = 0 (masked) gives dS = P' = 0
              const T p = s[r][jj];
              dp[r][jj] = p == T(0) ? T(0) : p * (dp[r][jj] * f[jj] - delta[r]);  // dS = P (dP - delta)
              s[r][jj] = p * f[jj];                                                // P'
            }
          }
          tile_gemm_keys(dvn + j0 * d.E, d.E, s, grows, nj, d.E);   // dV_j += sum_i p'_ij dO_i
          tile_gemm_keys(dkn + j0 * d.D, d.D, dp, qrows, nj, d.D);  // dK_j += sum_i dS_ij (s q_i)
          tile_gemm_rows(dqrows, dp, kn + j0 * d.D, d.D, nj, d.D);  // dQ_i += sum_j dS_ij k_j
        }
        for (int64_t r = 0; r < nr; ++r)  // dQ = scale dS K
          for (int64_t c = 0; c < d.D; ++c) dqrows[r][c] *= scale;
      }
    }
  }
}

}  // namespace

// The entry points of one implementation, written once for the fast kernels and for ref: the
// arguments checked, then its forward or backward template for float32 or float64.
#define GRAFT_ATTENTION_ENTRIES(forward, backward)                                                \
  void attention(const TensorView& q, const TensorView& k, const TensorView& v,                   \
                 const TensorView& mask, const AttentionArgs& a, const TensorView& out,           \
                 const TensorView& lse) {                                                         \
    check_args("attention", q, k, v, mask);                                                       \
    if (q.dtype == DType::f32) forward<float>(q, k, v, mask, a, out, lse);                        \
    else forward<double>(q, k, v, mask, a, out, lse);                                             \
  }                                                                                               \
  void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,          \
                          const TensorView& mask, const AttentionArgs& a, const TensorView& out,  \
                          const TensorView& lse, const TensorView& dout, const TensorView& dq,    \
                          const TensorView& dk, const TensorView& dv) {                           \
    check_args("attention_backward", q, k, v, mask);                                              \
    if (q.dtype == DType::f32) backward<float>(q, k, v, mask, a, out, lse, dout, dq, dk, dv);     \
    else backward<double>(q, k, v, mask, a, out, lse, dout, dq, dk, dv);                          \
  }

GRAFT_ATTENTION_ENTRIES(fast_forward, fast_backward)
namespace ref {
GRAFT_ATTENTION_ENTRIES(ref_forward, ref_backward)
}  // namespace ref
#undef GRAFT_ATTENTION_ENTRIES

}  // namespace graft::cpu
