// Elementwise CPU kernels: fill, copy, unary, unary_backward, binary, compare, where.
//
// graft::cpu (fast): operands are collapsed to the fewest dims that describe their layouts
// (a contiguous tensor becomes one dim of numel), then the work runs row by row over the
// innermost dim. Float math runs on xsimd batches everywhere: straight from memory where the
// row's operands have unit stride (or stride 0: broadcast), packed into batches otherwise (see
// simd_row). Big tensors split the flat index range into one chunk per thread (OpenMP); small
// ones never touch OpenMP, allocate nothing and build no std::function.
//
// graft::cpu::ref (reference): plain scalar loops, for_each_offset on the output, any strides.
// GCC 12 flags the deliberate "undefined" registers inside its own AVX-512 intrinsics
// (`__m512 __Y = __Y;`) as uninitialised when xsimd inlines them; that is not our code.
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "ops/cpu/cpu_kernels.h"
#include "ops/functors.h"
#include "ops/kernel_checks.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

// ------------------------------------------------------------------ iteration engine

// The shared shape of N operands and each one's strides, collapsed. Dims are outer-first;
// dim rank-1 is the innermost (the "row").
template <int N> struct Loop {
  int rank = 1;
  int64_t numel = 0;
  int64_t shape[kMaxDims];
  int64_t stride[N][kMaxDims];
};

// Builds the collapsed loop for `shape` and per-operand strides `st`: size-1 dims are dropped
// and dim d merges into the next inner one when every operand steps through both as a single
// dim (stride[d] == stride[d+1] * shape[d+1]). Broadcast (stride 0) dims merge with each other.
template <int N> Loop<N> make_loop(const Shape& shape, const Strides* const (&st)[N]) {
  Loop<N> L;
  L.numel = shape.numel();
  int r = 0;  // filled innermost-first, reversed below
  for (int d = shape.size() - 1; d >= 0; --d) {
    const int64_t n = shape[d];
    if (n == 1) continue;
    bool merge = r > 0;
    for (int k = 0; k < N && merge; ++k) merge = (*st[k])[d] == L.stride[k][r - 1] * L.shape[r - 1];
    if (merge) {
      L.shape[r - 1] *= n;
    } else {
      L.shape[r] = n;
      for (int k = 0; k < N; ++k) L.stride[k][r] = (*st[k])[d];
      ++r;
    }
  }
  if (r == 0) {  // a single element
    L.shape[0] = 1;
    for (int k = 0; k < N; ++k) L.stride[k][0] = 0;
    r = 1;
  }
  L.rank = r;
  std::reverse(L.shape, L.shape + r);
  for (int k = 0; k < N; ++k) std::reverse(L.stride[k], L.stride[k] + r);
  return L;
}

// Calls row(off, inner_stride, len) for the row segments covering flat indices [begin, end):
// off[k] is operand k's element offset of the segment's first element.
template <int N, class Row>
void run_range(const Loop<N>& L, int64_t begin, int64_t end, const Row& row) {
  const int r = L.rank;
  int64_t inner_st[N], off[N] = {}, idx[kMaxDims];
  for (int k = 0; k < N; ++k) inner_st[k] = L.stride[k][r - 1];
  int64_t rem = begin;  // unravel `begin`
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % L.shape[d];
    rem /= L.shape[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * L.stride[k][d];
  }
  const int64_t inner = L.shape[r - 1];
  for (int64_t i = begin; i < end;) {
    const int64_t len = std::min(inner - idx[r - 1], end - i);
    row(off, inner_st, len);
    i += len;
    // back to the start of this row, then step the outer dims like an odometer
    for (int k = 0; k < N; ++k) off[k] -= idx[r - 1] * inner_st[k];
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < L.shape[d]) {
        for (int k = 0; k < N; ++k) off[k] += L.stride[k][d];
        break;
      }
      for (int k = 0; k < N; ++k) off[k] -= L.stride[k][d] * (L.shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Splits [0, n) into `parts` chunks (multiples of 64 elements, so threads never share the
// cache line of an output) and returns chunk t.
inline std::pair<int64_t, int64_t> chunk(int64_t n, int parts, int t) {
  int64_t per = (n + parts - 1) / parts;
  per = (per + 63) / 64 * 64;
  const int64_t b = std::min(n, per * t);
  return {b, std::min(n, b + per)};
}

// Runs the whole loop; one chunk per thread when the tensor is big enough to pay for OpenMP.
template <int N, class Row> void run(const Loop<N>& L, const Row& row) {
  if (L.numel <= 0) return;
  if (L.numel < kParallelGrain) {
    if (L.rank == 1) {  // the common small case: one row, no unravelling
      int64_t off[N] = {}, st[N];
      for (int k = 0; k < N; ++k) st[k] = L.stride[k][0];
      row(off, st, L.numel);
    } else {
      run_range(L, 0, L.numel, row);
    }
    return;
  }
  const int parts = omp_get_max_threads();
#pragma omp parallel for schedule(static)
  for (int t = 0; t < parts; ++t) {
    auto [b, e] = chunk(L.numel, parts, t);
    if (b < e) run_range(L, b, e, row);
  }
}

template <class T> using Batch = xsimd::batch<T>;

// ---- AVX-512 helpers (plain xsimd has no masked or non-temporal memory operations).
// Partial batches for the last r < W elements of a contiguous row are single masked
// loads/stores (lanes past r read p[0], a valid input, and are never written); a staging
// buffer instead costs a store-forwarding stall per operand, most of the time of an op on a
// tiny tensor. Without AVX-512, simd_row packs tails through a buffer and never streams.
template <class T> constexpr bool kAvx512 = XSIMD_WITH_AVX512F && sizeof(Batch<T>) == 64;
#if XSIMD_WITH_AVX512F
inline Batch<float> load_tail(const float* p, int64_t r) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(p[0]), __mmask16((1u << r) - 1), p);
}
inline Batch<double> load_tail(const double* p, int64_t r) {
  return _mm512_mask_loadu_pd(_mm512_set1_pd(p[0]), __mmask8((1u << r) - 1), p);
}
inline void store_tail(const Batch<float>& v, float* p, int64_t r) {
  _mm512_mask_storeu_ps(p, __mmask16((1u << r) - 1), v);
}
inline void store_tail(const Batch<double>& v, double* p, int64_t r) {
  _mm512_mask_storeu_pd(p, __mmask8((1u << r) - 1), v);
}
// Non-temporal store to a 64-byte aligned address.
inline void store_stream(const Batch<float>& v, float* p) { _mm512_stream_ps(p, v); }
inline void store_stream(const Batch<double>& v, double* p) { _mm512_stream_pd(p, v); }
inline void stream_fence() { _mm_sfence(); }
#else
template <class T> Batch<T> load_tail(const T* p, int64_t) { return Batch<T>(p[0]); }  // unused
template <class T> void store_tail(const Batch<T>&, T*, int64_t) {}                    // unused
template <class T> void store_stream(const Batch<T>& v, T* p) { v.store_aligned(p); }  // unused
inline void stream_fence() {}
#endif

// Rows at least this big (per thread) are far larger than a core's L2, so their output will
// come back from memory anyway: they store with non-temporal stores, which skip reading each
// output line before overwriting it (a third of the traffic of a binary op), and prefetch
// their inputs kPrefetch elements ahead so loads stay in flight while the math runs.
constexpr int64_t kStreamBytes = int64_t(4) << 20;
constexpr int64_t kPrefetchBytes = 4096;

// The unit-stride body of simd_row for a big row: full batches from i until fewer than W
// remain; returns where it stopped.
template <int K, class T, class F>
int64_t stream_row(const T* const (&in)[K], T* out, int64_t n, const F& f) {
  using B = Batch<T>;
  constexpr int64_t W = B::size, kPrefetch = kPrefetchBytes / sizeof(T);
  B b[K];
  // head: masked batch up to the first 64-byte aligned output element
  int64_t i = int64_t((64 - reinterpret_cast<uintptr_t>(out) % 64) % 64) / int64_t(sizeof(T));
  if (i > 0) {
    for (int j = 0; j < K; ++j) b[j] = load_tail(in[j], i);
    store_tail(f(b), out, i);
  }
  for (; i + W <= n; i += W) {
    for (int j = 0; j < K; ++j) {
      __builtin_prefetch(in[j] + std::min(i + kPrefetch, n - 1));
      b[j] = B::load_unaligned(in[j] + i);
    }
    store_stream(f(b), out + i);
  }
  stream_fence();  // order the weakly-ordered streaming stores before anyone reads `out`
  return i;
}

// out[k * os] = f(in[0][k * st[0]], ..., in[K-1][k * st[K-1]]) for k < n, where f maps K
// batches to one (f(const Batch<T>* b)). Rows whose output is contiguous and whose inputs are
// contiguous (stride 1) or broadcast (stride 0) run full batches straight from memory. The
// rest (the tail of such rows, or any strided row) is packed W lanes at a time into aligned
// buffers and still computed by the SIMD functor: a scalar erf/exp/tanh call costs more than
// packing a whole batch, and fast results then never depend on where an element falls.
template <int K, class T, class F>
void simd_row(const T* const (&in)[K], const int64_t* st, T* out, int64_t os, int64_t n,
              const F& f) {
  using B = Batch<T>;
  constexpr int64_t W = B::size;
  B b[K];
  int64_t i = 0;
  bool unit = os == 1, unit_or_bcast = os == 1;
  for (int j = 0; j < K; ++j) {
    unit = unit && st[j] == 1;
    unit_or_bcast = unit_or_bcast && (st[j] == 1 || st[j] == 0);
  }
  if (unit && kAvx512<T> && n * int64_t(sizeof(T)) >= kStreamBytes &&
      reinterpret_cast<uintptr_t>(out) % sizeof(T) == 0) {
    i = stream_row<K>(in, out, n, f);
  } else if (unit) {  // the common case: every operand contiguous
    for (; i + W <= n; i += W) {
      for (int j = 0; j < K; ++j) b[j] = B::load_unaligned(in[j] + i);
      f(b).store_unaligned(out + i);
    }
  } else if (unit_or_bcast) {  // some operands broadcast along this row: load them once
    for (int j = 0; j < K; ++j)
      if (st[j] == 0) b[j] = B(*in[j]);
    for (; i + W <= n; i += W) {
      for (int j = 0; j < K; ++j)
        if (st[j] != 0) b[j] = B::load_unaligned(in[j] + i);
      f(b).store_unaligned(out + i);
    }
  }
  if (i == n) return;
  if (unit && kAvx512<T>) {  // contiguous tail: masked load/store, no staging buffer
    const int64_t r = n - i;
    for (int j = 0; j < K; ++j) b[j] = load_tail(in[j] + i, r);
    store_tail(f(b), out + i, r);
    return;
  }
  // Packed remainder; a short tail is padded with copies of its first element (a valid input).
  alignas(64) T buf[K][W], res[W];
  for (; i < n; i += W) {
    const int64_t r = std::min(W, n - i);
    for (int j = 0; j < K; ++j) {
      const T* p = in[j] + i * st[j];
      B(p[0]).store_aligned(buf[j]);
      for (int64_t k = 1; k < r; ++k) buf[j][k] = p[k * st[j]];
      b[j] = B::load_aligned(buf[j]);
    }
    f(b).store_aligned(res);
    for (int64_t k = 0; k < r; ++k) out[(i + k) * os] = res[k];
  }
}

// ------------------------------------------------------------------ unary / binary

template <class F, class T> void unary_run(double a, const TensorView& x, const TensorView& out) {
  const Strides* st[2] = {&out.strides, &x.strides};
  const auto L = make_loop<2>(out.shape, st);
  const T* xp = x.ptr<T>();
  T* yp = out.ptr<T>();
  run(L, [&](const int64_t* off, const int64_t* s, int64_t n) {
    const T* in[1] = {xp + off[1]};
    simd_row<1>(in, s + 1, yp + off[0], s[0], n, [a](const Batch<T>* b) { return F::f(b[0], a); });
  });
}

// dx = F::df(x, y, dy)
template <class F, class T>
void unary_bwd_run(double a, const TensorView& x, const TensorView& y, const TensorView& dy,
                   const TensorView& dx) {
  const Strides* st[4] = {&dx.strides, &x.strides, &y.strides, &dy.strides};
  const auto L = make_loop<4>(dx.shape, st);
  const T *xp = x.ptr<T>(), *yp = y.ptr<T>(), *gp = dy.ptr<T>();
  T* op = dx.ptr<T>();
  run(L, [&](const int64_t* off, const int64_t* s, int64_t n) {
    const T* in[3] = {xp + off[1], yp + off[2], gp + off[3]};
    simd_row<3>(in, s + 1, op + off[0], s[0], n,
                [a](const Batch<T>* b) { return F::df(b[0], b[1], b[2], a); });
  });
}

template <class F, class T>
void binary_run(const TensorView& a, const TensorView& b, const TensorView& out) {
  const Strides* st[3] = {&out.strides, &a.strides, &b.strides};
  const auto L = make_loop<3>(out.shape, st);
  const T *ap = a.ptr<T>(), *bp = b.ptr<T>();
  T* op = out.ptr<T>();
  run(L, [&](const int64_t* off, const int64_t* s, int64_t n) {
    const T* in[2] = {ap + off[1], bp + off[2]};
    simd_row<2>(in, s + 1, op + off[0], s[0], n,
                [](const Batch<T>* v) { return F::f(v[0], v[1]); });
  });
}

// ------------------------------------------------------------------ compare / where / copy

#define GRAFT_CMP_FUNCTOR(name, op)                               \
  struct Cmp_##name {                                             \
    template <class T> static bool f(T a, T b) { return a op b; } \
  };
GRAFT_COMPARE_OPS(GRAFT_CMP_FUNCTOR)
#undef GRAFT_CMP_FUNCTOR

// The op -> functor switches, written once for the fast and the reference kernels: each calls
// k(std::type_identity<Functor>{}) for the functor of `op` (preprocessor directives may not
// sit inside the dispatch macro's argument, hence functions).
template <class K> void with_unary_functor(UnaryOp op, K&& k) {
  switch (op) {
#define GRAFT_CASE(name, F, ...) \
  case UnaryOp::name: return k(std::type_identity<fn::F>{});
    GRAFT_UNARY_OPS(GRAFT_CASE)
#undef GRAFT_CASE
  }
}
template <class K> void with_binary_functor(BinaryOp op, K&& k) {
  switch (op) {
#define GRAFT_CASE(name, F) \
  case BinaryOp::name: return k(std::type_identity<fn::F>{});
    GRAFT_BINARY_OPS(GRAFT_CASE)
#undef GRAFT_CASE
  }
}
template <class K> void with_compare_functor(CompareOp op, K&& k) {
  switch (op) {
#define GRAFT_CASE(name, ...) \
  case CompareOp::name: return k(std::type_identity<Cmp_##name>{});
    GRAFT_COMPARE_OPS(GRAFT_CASE)
#undef GRAFT_CASE
  }
}

// The functor's type in a with_*_functor callback.
#define GRAFT_FUNCTOR(f) typename decltype(f)::type

template <class C, class T>
void compare_run(const TensorView& a, const TensorView& b, const TensorView& out) {
  const Strides* st[3] = {&out.strides, &a.strides, &b.strides};
  const auto L = make_loop<3>(out.shape, st);
  const T *ap = a.ptr<T>(), *bp = b.ptr<T>();
  bool* op = out.ptr<bool>();
  run(L, [&](const int64_t* off, const int64_t* s, int64_t n) {
    bool* o = op + off[0];
    const T *ar = ap + off[1], *br = bp + off[2];
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {  // unit strides: the compiler vectorises this
      for (int64_t i = 0; i < n; ++i) o[i] = C::f(ar[i], br[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) o[i * s[0]] = C::f(ar[i * s[1]], br[i * s[2]]);
  });
}

template <class T>
void where_run(const TensorView& cond, const TensorView& a, const TensorView& b,
               const TensorView& out) {
  const Strides* st[4] = {&out.strides, &cond.strides, &a.strides, &b.strides};
  const auto L = make_loop<4>(out.shape, st);
  const bool* cp = cond.ptr<bool>();
  const T *ap = a.ptr<T>(), *bp = b.ptr<T>();
  T* op = out.ptr<T>();
  run(L, [&](const int64_t* off, const int64_t* s, int64_t n) {
    T* o = op + off[0];
    const bool* c = cp + off[1];
    const T *ar = ap + off[2], *br = bp + off[3];
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? ar[i] : br[i];
      return;
    }
    for (int64_t i = 0; i < n; ++i) o[i * s[0]] = c[i * s[1]] ? ar[i * s[2]] : br[i * s[3]];
  });
}

template <class D, class S> void copy_run(const TensorView& dst, const TensorView& src) {
  const Strides* st[2] = {&dst.strides, &src.strides};
  const auto L = make_loop<2>(dst.shape, st);
  D* dp = dst.ptr<D>();
  const S* sp = src.ptr<S>();
  run(L, [&](const int64_t* off, const int64_t* s, int64_t n) {
    D* d = dp + off[0];
    const S* r = sp + off[1];
    if constexpr (std::is_same_v<D, S>) {
      if (s[0] == 1 && s[1] == 1) {
        std::memcpy(d, r, n * sizeof(D));
        return;
      }
    }
    if (s[0] == 1 && s[1] == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(r[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) d[i * s[0]] = static_cast<D>(r[i * s[1]]);
  });
}


}  // namespace

// ------------------------------------------------------------------ fast entry points

void fill(const TensorView& dst, double value) {
  GRAFT_DISPATCH_ALL(dst.dtype, "fill", T, [&] {
    const T v = static_cast<T>(value);
    const Strides* st[1] = {&dst.strides};
    const auto L = make_loop<1>(dst.shape, st);
    T* p = dst.ptr<T>();
    run(L, [&](const int64_t* off, const int64_t* s, int64_t n) {
      T* d = p + off[0];
      if (s[0] == 1)
        std::fill_n(d, n, v);
      else
        for (int64_t i = 0; i < n; ++i) d[i * s[0]] = v;
    });
  });
}

void copy(const TensorView& dst, const TensorView& src) {
  GRAFT_DISPATCH_ALL(dst.dtype, "copy", D, [&] {
    GRAFT_DISPATCH_ALL(src.dtype, "copy", S, [&] { copy_run<D, S>(dst, src); });
  });
}

#include "ops/cpu/elementwise_entries.inc"

// ------------------------------------------------------------------ reference kernels
namespace ref {
namespace {

// Element offset of flat (row-major) index i of v.
int64_t offset_at(const TensorView& v, int64_t i) {
  int64_t off = 0;
  for (int d = v.rank() - 1; d >= 0; --d) {
    off += (i % v.shape[d]) * v.strides[d];
    i /= v.shape[d];
  }
  return off;
}

template <class T> T at(const TensorView& v, int64_t i) { return v.ptr<T>()[offset_at(v, i)]; }

// Per-op scalar loops, one instantiation per functor (the names are the fast kernels', for
// ops/cpu/elementwise_entries.inc).
template <class F, class T> void unary_run(double alpha, const TensorView& x, const TensorView& out) {
  for_each_offset(out.shape, out.strides,
                  [&](int64_t i, int64_t off) { out.ptr<T>()[off] = F::f(at<T>(x, i), alpha); });
}
template <class F, class T>
void unary_bwd_run(double alpha, const TensorView& x, const TensorView& y, const TensorView& dy,
                   const TensorView& dx) {
  for_each_offset(dx.shape, dx.strides, [&](int64_t i, int64_t off) {
    dx.ptr<T>()[off] = F::df(at<T>(x, i), at<T>(y, i), at<T>(dy, i), alpha);
  });
}
template <class F, class T>
void binary_run(const TensorView& a, const TensorView& b, const TensorView& out) {
  for_each_offset(out.shape, out.strides, [&](int64_t i, int64_t off) {
    out.ptr<T>()[off] = F::f(at<T>(a, i), at<T>(b, i));
  });
}
template <class C, class T>
void compare_run(const TensorView& a, const TensorView& b, const TensorView& out) {
  for_each_offset(out.shape, out.strides, [&](int64_t i, int64_t off) {
    out.ptr<bool>()[off] = C::f(at<T>(a, i), at<T>(b, i));
  });
}
template <class T>
void where_run(const TensorView& cond, const TensorView& a, const TensorView& b,
               const TensorView& out) {
  for_each_offset(out.shape, out.strides, [&](int64_t i, int64_t off) {
    out.ptr<T>()[off] = at<bool>(cond, i) ? at<T>(a, i) : at<T>(b, i);
  });
}
}  // namespace

void fill(const TensorView& dst, double value) {
  GRAFT_DISPATCH_ALL(dst.dtype, "fill", T, [&] {
    for_each_offset(dst.shape, dst.strides,
                    [&](int64_t, int64_t off) { dst.ptr<T>()[off] = static_cast<T>(value); });
  });
}

void copy(const TensorView& dst, const TensorView& src) {
  GRAFT_DISPATCH_ALL(dst.dtype, "copy", D, [&] {
    GRAFT_DISPATCH_ALL(src.dtype, "copy", S, [&] {
      for_each_offset(dst.shape, dst.strides, [&](int64_t i, int64_t off) {
        dst.ptr<D>()[off] = static_cast<D>(at<S>(src, i));
      });
    });
  });
}

#include "ops/cpu/elementwise_entries.inc"

}  // namespace ref
}  // namespace graft::cpu
