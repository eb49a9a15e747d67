// Reductions (sum, max, min) over the dims where out.shape[d] == 1 && x.shape[d] != 1.
//
// graft::cpu (fast): x's dims are split into two groups, kept (K, the outputs) and reduced (R),
// each collapsed to as few dims as x's strides allow. Then one of three paths runs:
//   A. R's innermost dim is contiguous in x ("reduce rows"): every output is a sum of
//      contiguous runs, reduced with SIMD accumulators.
//   B. K's innermost dim is contiguous in x ("reduce over outer dims"): every output row is the
//      elementwise combination of many contiguous x rows, accumulated a block of columns at a
//      time with SIMD.
//   C. anything else: a strided scalar loop per output.
// Sums never run long in float32: path A adds at most 16 values per float lane before the
// block's sum moves to a double, paths B and C accumulate in double. A float32 sum of 16M
// values keeps ~1e-7 relative accuracy (a plain float accumulator would be off by percents).
// Big reductions split over OpenMP threads, by outputs when there are many, else by slices of
// the reduced elements whose partial results are merged.
//
// graft::cpu::ref (reference): one for_each_offset loop over x with double accumulators.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positives in AVX-512 headers

#include <omp.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "ops/cpu/cpu_kernels.h"
#include "ops/functors.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

template <class T> using Batch = xsimd::batch<T>;

// The three reductions as policies. `op` combines values (scalars or batches) of type T;
// `Acc` is the type block results are merged in (double for sums, for accuracy).
template <class T> struct SumOp {
  using Acc = double;
  static T init() { return T(0); }
  static Acc acc_init() { return 0.0; }
  template <class V> static V op(V a, V b) { return a + b; }
  static Acc merge(Acc a, Acc b) { return a + b; }
  static T hreduce(const Batch<T>& b) { return xsimd::hadd(b); }
};
template <class T> struct MaxOp {
  using Acc = T;
  static T init() { return -std::numeric_limits<T>::infinity(); }
  static Acc acc_init() { return init(); }
  template <class V> static V op(V a, V b) { return fn::vmax(a, b); }
  static Acc merge(Acc a, Acc b) { return fn::vmax(a, b); }
  static T hreduce(const Batch<T>& b) {  // xsimd 8.1 has no horizontal max: spill the lanes
    alignas(64) T lanes[Batch<T>::size];
    b.store_aligned(lanes);
    T r = lanes[0];
    for (size_t i = 1; i < Batch<T>::size; ++i) r = fn::vmax(r, lanes[i]);
    return r;
  }
};
template <class T> struct MinOp {
  using Acc = T;
  static T init() { return std::numeric_limits<T>::infinity(); }
  static Acc acc_init() { return init(); }
  template <class V> static V op(V a, V b) { return fn::vmin(a, b); }
  static Acc merge(Acc a, Acc b) { return fn::vmin(a, b); }
  static T hreduce(const Batch<T>& b) {
    alignas(64) T lanes[Batch<T>::size];
    b.store_aligned(lanes);
    T r = lanes[0];
    for (size_t i = 1; i < Batch<T>::size; ++i) r = fn::vmin(r, lanes[i]);
    return r;
  }
};

// Dims of x (shape, x strides), outer-first, collapsed where x steps through two as one.
// Plain arrays: building these is most of the cost of reducing a tiny tensor.
struct Group {
  int n = 0;
  int64_t shape[kMaxDims], strides[kMaxDims];
  // Appends (size, stride) as the new innermost dim.
  void push(int64_t size, int64_t stride) {
    if (size == 1) return;
    if (n > 0 && strides[n - 1] == stride * size) {  // the outer dim continues this one: merge
      shape[n - 1] *= size;
      strides[n - 1] = stride;
      return;
    }
    shape[n] = size;
    strides[n++] = stride;
  }
  // Elements of the first `nd` dims (all by default).
  int64_t numel(int nd) const {
    int64_t p = 1;
    for (int d = 0; d < nd; ++d) p *= shape[d];
    return p;
  }
  int64_t numel() const { return numel(n); }
  // x offset of flat index i over the first `nd` dims.
  int64_t offset(int64_t i, int nd) const {
    if (nd == 1) return i * strides[0];
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; --d) {
      off += (i % shape[d]) * strides[d];
      i /= shape[d];
    }
    return off;
  }
  int64_t offset(int64_t i) const { return offset(i, n); }
  int64_t inner_stride() const { return strides[n - 1]; }
};

// Part t of [0, n) split into `parts` near-equal ranges.
inline std::pair<int64_t, int64_t> slice(int64_t n, int parts, int t) {
  return {n * t / parts, n * (t + 1) / parts};
}

// f(i) for i in [0, n), over OpenMP threads when `par` (and without touching OpenMP otherwise).
template <class F> void parallel_for(int64_t n, bool par, const F& f) {
  if (!par) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// Reduces x[0:n] (contiguous). Four SIMD accumulators hide the add latency; every kBlock
// elements the lanes are folded and merged into the Acc result, so each float lane adds at
// most 16 values before its sum moves to double.
template <class P, class T> typename P::Acc reduce_contig(const T* x, int64_t n) {
  using B = Batch<T>;
  constexpr int64_t W = B::size, kBlock = 1024;
  typename P::Acc acc = P::acc_init();
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const T* p = x + b0;
    const int64_t len = std::min(kBlock, n - b0);
    B a0(P::init()), a1(P::init()), a2(P::init()), a3(P::init());
    int64_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      a0 = P::op(a0, B::load_unaligned(p + i));
      a1 = P::op(a1, B::load_unaligned(p + i + W));
      a2 = P::op(a2, B::load_unaligned(p + i + 2 * W));
      a3 = P::op(a3, B::load_unaligned(p + i + 3 * W));
    }
    for (; i + W <= len; i += W) a0 = P::op(a0, B::load_unaligned(p + i));
    T s = P::hreduce(P::op(P::op(a0, a1), P::op(a2, a3)));
    for (; i < len; ++i) s = P::op(s, p[i]);
    acc = P::merge(acc, s);
  }
  return acc;
}

// Path B worker. dst[c] = reduction over the R rows r in [rb, re) of x[R.offset(r) + c], for
// c in [0, w), w <= kCols; `x` points at the first column. Each row piece is read whole
// (32 KB of float32 at most: several pages in a row, so the hardware prefetcher keeps
// streaming) into an accumulator row that stays in L1/L2. The accumulator has the Acc type
// (double for sums: float rows added into a float accumulator thousands of times drift by
// ~1e-5; the conversion is free next to the memory traffic). The compiler vectorises the loop.
constexpr int64_t kCols = 8192;
template <class P, class T>
void reduce_cols(const T* x, const Group& R, int64_t rb, int64_t re, int64_t w,
                 typename P::Acc* dst) {
  using Acc = typename P::Acc;
  std::fill_n(dst, w, P::acc_init());
  for (int64_t r = rb; r < re; ++r) {
    const T* __restrict row = x + R.offset(r);
    Acc* __restrict acc = dst;
#pragma omp simd
    for (int64_t c = 0; c < w; ++c) acc[c] = P::merge(acc[c], Acc(row[c]));
  }
}

template <class P, class T> void reduce_run(const TensorView& x, const TensorView& out) {
  using Acc = typename P::Acc;
  GRAFT_ASSERT(out.rank() == x.rank() && out.is_contiguous());
  const T* xp = x.ptr<T>();
  T* o = out.ptr<T>();
  if (out.numel() == 0) return;
  if (x.numel() == 0) {  // reducing nothing gives the identity
    std::fill_n(o, out.numel(), T(P::acc_init()));
    return;
  }
  Group K, R;  // kept dims (one per output element) and reduced dims
  for (int d = 0; d < x.rank(); ++d) {
    GRAFT_ASSERT(out.shape[d] == x.shape[d] || out.shape[d] == 1);
    if (out.shape[d] == 1 && x.shape[d] != 1)
      R.push(x.shape[d], x.strides[d]);
    else
      K.push(x.shape[d], x.strides[d]);
  }
  const int64_t M = K.numel(), N = R.numel();
  const bool par = x.numel() >= kParallelGrain;
  const int nth = par ? omp_get_max_threads() : 1;

  if (R.n > 0 && R.inner_stride() == 1) {
    // ---- A: out[m] = reduce of N values made of contiguous runs of L (x[m, ro, 0:L]).
    const int64_t L = R.shape[R.n - 1];
    // Reduces flat reduced indices [b, e) of output m, a contiguous run at a time.
    auto span = [&](int64_t m, int64_t b, int64_t e) {
      const T* xm = xp + K.offset(m);
      Acc a = P::acc_init();
      int64_t ro = b / L, l = b % L;  // run ro, starting at element l
      for (; b < e; ++ro, l = 0) {
        const int64_t len = std::min(L - l, e - b);
        a = P::merge(a, reduce_contig<P>(xm + R.offset(ro, R.n - 1) + l, len));
        b += len;
      }
      return a;
    };
    if (!par || M >= 8 * nth) {  // many outputs: one thread per output
      parallel_for(M, par, [&](int64_t m) { o[m] = T(span(m, 0, N)); });
    } else {  // few long outputs (e.g. a full sum): each thread takes a slice of every one
      std::vector<Acc> part(nth * M);
      parallel_for(nth, true, [&](int64_t t) {
        auto [b, e] = slice(N, nth, int(t));
        for (int64_t m = 0; m < M; ++m) part[t * M + m] = span(m, b, e);
      });
      for (int64_t m = 0; m < M; ++m) {
        Acc a = P::acc_init();
        for (int t = 0; t < nth; ++t) a = P::merge(a, part[t * M + m]);
        o[m] = T(a);
      }
    }
  } else if (K.n > 0 && K.inner_stride() == 1) {
    // ---- B: out[ko, 0:W] = reduce over r of x[ko, r, 0:W]; tasks are (ko, column block).
    const int64_t W = K.shape[K.n - 1];
    const int64_t nb = (W + kCols - 1) / kCols, tasks = K.numel(K.n - 1) * nb;
    // Task t: out row ko, columns [c0, c0 + w).
    auto cols = [&](int64_t t) {
      const int64_t ko = t / nb, c0 = (t % nb) * kCols;
      return std::tuple{xp + K.offset(ko, K.n - 1) + c0, o + ko * W + c0, std::min(kCols, W - c0)};
    };
    if (!par || tasks >= nth) {
      parallel_for(tasks, par, [&](int64_t t) {
        auto [src, dst, w] = cols(t);
        Acc tmp[kCols];
        reduce_cols<P>(src, R, 0, N, w, tmp);
        for (int64_t c = 0; c < w; ++c) dst[c] = T(tmp[c]);
      });
    } else {  // few column blocks, many rows: threads split the rows, partials are merged
      std::vector<Acc> part(nth * kCols);
      for (int64_t t = 0; t < tasks; ++t) {
        auto [src, dst, w] = cols(t);
        parallel_for(nth, true, [&](int64_t th) {
          auto [rb, re] = slice(N, nth, int(th));
          reduce_cols<P>(src, R, rb, re, w, &part[th * kCols]);
        });
        for (int64_t c = 0; c < w; ++c) {
          Acc a = P::acc_init();
          for (int th = 0; th < nth; ++th) a = P::merge(a, part[th * kCols + c]);
          dst[c] = T(a);
        }
      }
    }
  } else {
    // ---- C: no contiguous inner dim in either group: strided scalar loop per output.
    parallel_for(M, par, [&](int64_t m) {
      const T* xm = xp + K.offset(m);
      Acc a = P::acc_init();
      for_each_offset(Shape(std::span(R.shape, R.n)), Strides(std::span(R.strides, R.n)),
                      [&](int64_t, int64_t off) { a = P::merge(a, Acc(xm[off])); });
      o[m] = T(a);
    });
  }
}

template <class T> void reduce_t(ReduceOp op, const TensorView& x, const TensorView& out) {
  switch (op) {
    case ReduceOp::sum: return reduce_run<SumOp<T>, T>(x, out);
    case ReduceOp::max: return reduce_run<MaxOp<T>, T>(x, out);
    case ReduceOp::min: return reduce_run<MinOp<T>, T>(x, out);
  }
}

// f(x offset, out offset) for every line of x along `dim` (all dims but dim fixed).
template <class F>
void for_each_line(const TensorView& x, const TensorView& out, int dim, bool par, const F& f) {
  const int64_t N = x.shape[dim], lines = N == 0 ? 0 : x.numel() / N;
  parallel_for(lines, par, [&](int64_t l) {
    int64_t ox = 0, oo = 0;
    for (int d = x.rank() - 1; d >= 0; --d) {
      if (d == dim) continue;
      const int64_t i = l % x.shape[d];
      l /= x.shape[d];
      ox += i * x.strides[d];
      oo += i * out.strides[d];
    }
    f(ox, oo);
  });
}

void check_cumsum(const TensorView& x, int dim, const TensorView& out) {
  GRAFT_CHECK(x.dtype == out.dtype, "cumsum: output dtype {} differs from input dtype {}",
              out.dtype, x.dtype);
  GRAFT_CHECK(x.shape == out.shape, "cumsum: output shape {} differs from input shape {}",
              out.shape.str(), x.shape.str());
  GRAFT_CHECK(dim >= 0 && dim < x.rank(), "cumsum: dim {} out of range for rank {}", dim, x.rank());
}

}  // namespace

// Lines in parallel (OpenMP) when big; each line a sequential double accumulator.
void cumsum(const TensorView& x, int dim, bool reverse, const TensorView& out) {
  check_cumsum(x, dim, out);
  GRAFT_DISPATCH_FLOAT(x.dtype, "cumsum", T, [&] {
    const int64_t N = x.shape[dim], sx = x.strides[dim], so = out.strides[dim];
    const T* xp = x.ptr<T>();
    T* op = out.ptr<T>();
    for_each_line(x, out, dim, x.numel() >= (int64_t(1) << 16), [&](int64_t ox, int64_t oo) {
      double acc = 0;
      for (int64_t k = 0; k < N; ++k) {
        const int64_t j = reverse ? N - 1 - k : k;
        acc += double(xp[ox + j * sx]);
        op[oo + j * so] = T(acc);
      }
    });
  });
}

void reduce(ReduceOp op, const TensorView& x, const TensorView& out) {
  GRAFT_CHECK(x.dtype == out.dtype, "reduce: output dtype {} differs from input dtype {}",
              out.dtype, x.dtype);
  GRAFT_DISPATCH_FLOAT(x.dtype, "reduce", T, [&] { reduce_t<T>(op, x, out); });
}

namespace ref {

void reduce(ReduceOp op, const TensorView& x, const TensorView& out) {
  GRAFT_CHECK(x.dtype == out.dtype, "reduce: output dtype {} differs from input dtype {}",
              out.dtype, x.dtype);
  GRAFT_DISPATCH_FLOAT(x.dtype, "reduce", T, [&] {
    const double init = op == ReduceOp::sum   ? 0.0
                        : op == ReduceOp::max ? -std::numeric_limits<double>::infinity()
                                              : std::numeric_limits<double>::infinity();
    std::vector<double> acc(out.numel(), init);
    // out's flat index of x's element: out's contiguous strides, 0 along reduced dims.
    Strides ost = contiguous_strides(out.shape);
    for (int d = 0; d < x.rank(); ++d)
      if (out.shape[d] == 1) ost[d] = 0;
    for_each_offset(x.shape, ost, [&](int64_t i, int64_t o) {
      int64_t off = 0;  // x's offset of flat index i
      for (int d = x.rank() - 1; d >= 0; --d) {
        off += (i % x.shape[d]) * x.strides[d];
        i /= x.shape[d];
      }
      const double v = x.ptr<T>()[off];
      if (op == ReduceOp::sum)
        acc[o] += v;
      else if (op == ReduceOp::max)
        acc[o] = std::max(acc[o], v);
      else
        acc[o] = std::min(acc[o], v);
    });
    for (int64_t i = 0; i < out.numel(); ++i) out.ptr<T>()[i] = T(acc[i]);
  });
}

// Every element on its own: out_i = sum over j <= i (j >= i when reverse) of x_j.
void cumsum(const TensorView& x, int dim, bool reverse, const TensorView& out) {
  check_cumsum(x, dim, out);
  GRAFT_DISPATCH_FLOAT(x.dtype, "cumsum", T, [&] {
    const int64_t N = x.shape[dim];
    for_each_offset(out.shape, out.strides, [&](int64_t i, int64_t off) {
      int64_t base = 0, pos = 0;  // x's offset of flat index i with dim's index 0, and that index
      for (int d = x.rank() - 1; d >= 0; --d) {
        const int64_t c = i % x.shape[d];
        i /= x.shape[d];
        if (d == dim) pos = c;
        else base += c * x.strides[d];
      }
      double acc = 0;
      for (int64_t j = reverse ? pos : 0; j < (reverse ? N : pos + 1); ++j)
        acc += double(x.ptr<T>()[base + j * x.strides[dim]]);
      out.ptr<T>()[off] = T(acc);
    });
  });
}

}  // namespace ref
}  // namespace graft::cpu
