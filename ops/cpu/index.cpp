// Indexing kernels: index_select, index_add, gather, scatter_add (torch semantics).
//
// The fast kernels view every tensor as [P, S, Q] around the indexed dim: P = product of the
// dims before it, S = its size, Q = product of the dims after it (one contiguous "row" of Q
// elements per (p, s)). With contiguous tensors a selected row is one memcpy / one vector add.
// index_select also copies strided views whose inner dims are unit-stride runs (a KV cache's
// narrowed buffer) one memcpy per run. Anything else (other strided views, gather/scatter with
// a src larger than index) goes to the reference kernels, which handle any strides.
//
// Determinism: index_add / scatter_add accumulate duplicates in the order of the index, and
// the parallel versions only split the work over P and over column chunks of Q, so every
// destination element is owned by one thread and sees its additions in the same order as the
// reference — the result does not depend on the thread count.
//
// Bounds: the caller checks indices and shapes, but these kernels must never write out of
// bounds, so each kernel checks them too and throws graft::Error (op, index, valid range).
// The fast kernels validate every index before any write (no exception may leave an OpenMP
// region, and dst stays untouched); so do the reference index_select / index_add, while the
// reference gather / scatter_add check each index just before using it.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "ops/cpu/cpu_kernels.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

[[noreturn]] void throw_bad_index(const char* op, int64_t value, int dim, int64_t size) {
  throw Error(fmt::format("{}: index {} is out of range for dim {} of size {} (valid: 0..{})",
                          op, value, dim, size, size - 1));
}

inline void check_index(const char* op, int64_t value, int dim, int64_t size) {
  if (value < 0 || value >= size) throw_bad_index(op, value, dim, size);
}

// Validates n contiguous indices against [0, size) in one branch-free pass, then finds the
// first offender for the message only if something is wrong.
void check_indices(const char* op, const int64_t* idx, int64_t n, int dim, int64_t size) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= uint64_t(idx[i]) >= uint64_t(size);
  if (!bad) return;
  for (int64_t i = 0; i < n; ++i) check_index(op, idx[i], dim, size);
}

// index is int64 and the two data tensors share a dtype (kernels never convert).
void check_dtypes(const char* op, const TensorView& index, const TensorView& a,
                  const TensorView& b) {
  GRAFT_CHECK(index.dtype == DType::i64, "{}: index must be int64, got {}", op, index.dtype);
  GRAFT_CHECK(a.dtype == b.dtype, "{}: dtype mismatch ({} vs {})", op, a.dtype, b.dtype);
}

// A rank-0 tensor behaves like shape [1] (torch allows dim 0 on scalars).
TensorView at_least_1d(TensorView v) {
  if (v.rank() == 0) {
    v.shape = Shape{1};
    v.strides = Strides{1};
  }
  return v;
}

// All index values in row-major order (the index of index_select / index_add is 1-D in torch,
// but a flattened [B, T] token index works the same).
std::vector<int64_t> read_index(const TensorView& index) {
  std::vector<int64_t> out(index.numel());
  const int64_t* p = index.ptr<int64_t>();
  for_each_offset(index.shape, index.strides, [&](int64_t i, int64_t off) { out[i] = p[off]; });
  return out;
}

// Coordinates of row-major linear index i in `shape`.
void unravel(int64_t i, const Shape& shape, int64_t* coord) {
  for (int d = shape.size() - 1; d >= 0; --d) {
    coord[d] = i % shape[d];
    i /= shape[d];
  }
}

int64_t offset_of(const int64_t* coord, const Strides& strides) {
  int64_t off = 0;
  for (int d = 0; d < strides.size(); ++d) off += coord[d] * strides[d];
  return off;
}

struct PSQ {
  int64_t P, S, Q;
};
// [P, S, Q] view of `shape` around `dim`.
PSQ split_at(const Shape& shape, int dim) {
  PSQ r{1, shape.size() ? shape[dim] : 1, 1};
  for (int d = 0; d < dim; ++d) r.P *= shape[d];
  for (int d = dim + 1; d < shape.size(); ++d) r.Q *= shape[d];
  return r;
}

// The same shapes except (possibly) at `dim`.
bool same_except(const Shape& a, const Shape& b, int dim) {
  if (a.size() != b.size()) return false;
  for (int d = 0; d < a.size(); ++d)
    if (d != dim && a[d] != b[d]) return false;
  return true;
}

// Shape contracts (ops/kernels.h). The caller guarantees them, but a mismatch would make the
// fast kernels read or write outside the buffers, so each is checked once per call.
void check_dim(const char* op, int dim, const TensorView& v) {
  GRAFT_CHECK(dim >= 0 && dim < v.rank(), "{}: dim {} out of range for shape {}", op, dim,
              v.shape);
}
// index_select / index_add: `sel` is `full` with dim -> K (the number of indices).
void check_selected(const char* op, const TensorView& full, int dim, int64_t K,
                    const TensorView& sel, const char* full_name, const char* sel_name) {
  check_dim(op, dim, full);
  Shape expect = full.shape;
  expect[dim] = K;
  GRAFT_CHECK(sel.shape == expect, "{}: {} has shape {}, expected {} ({} {} with dim {} -> {})",
              op, sel_name, sel.shape, expect, full_name, full.shape, dim, K);
}
// gather / scatter_add: same rank, and index no larger than `other` outside dim.
// (scatter_add's src must also cover index along dim: pass skip_dim = false.)
void check_index_fits(const char* op, const TensorView& index, int dim, const TensorView& other,
                      const char* other_name, bool skip_dim = true) {
  check_dim(op, dim, other);
  bool ok = index.rank() == other.rank();
  for (int d = 0; ok && d < index.rank(); ++d)
    ok = (skip_dim && d == dim) || index.shape[d] <= other.shape[d];
  GRAFT_CHECK(ok, "{}: index of shape {} does not fit {} of shape {}{}", op, index.shape,
              other_name, other.shape, skip_dim ? fmt::format(" outside dim {}", dim) : "");
}

// The argument checks every index_select / index_add shares (fast and reference): int64
// index, one dtype, `sel` shaped like `full` with dim -> numel(index). Returns the two views
// at rank >= 1, {full, sel}.
struct SelectViews {
  TensorView full, sel;
};
SelectViews checked_select(const char* op, const TensorView& full, int dim,
                           const TensorView& index, const TensorView& sel,
                           const char* full_name, const char* sel_name) {
  check_dtypes(op, index, full, sel);
  SelectViews v{at_least_1d(full), at_least_1d(sel)};
  check_selected(op, v.full, dim, index.numel(), v.sel, full_name, sel_name);
  return v;
}

// The same for gather (a = src, b = out) and scatter_add (a = dst, b = src), each at rank >= 1;
// `rows` when the fast row kernels apply: all contiguous, b shaped like index, and a too except
// along dim.
struct ElementViews {
  TensorView a, index, b;
  bool rows = false;
};
void find_rows(ElementViews& v, int dim) {
  v.rows = v.a.is_contiguous() && v.index.is_contiguous() && v.b.is_contiguous() &&
           v.b.shape == v.index.shape && same_except(v.a.shape, v.index.shape, dim);
}
ElementViews checked_gather(const TensorView& src, int dim, const TensorView& index,
                            const TensorView& out) {
  check_dtypes("gather", index, src, out);
  ElementViews v{at_least_1d(src), at_least_1d(index), at_least_1d(out)};
  check_index_fits("gather", v.index, dim, v.a, "src");
  GRAFT_CHECK(v.b.shape == v.index.shape,
              "gather: out has shape {}, expected the index shape {}", v.b.shape, v.index.shape);
  find_rows(v, dim);
  return v;
}
ElementViews checked_scatter_add(const TensorView& dst, int dim, const TensorView& index,
                                 const TensorView& src) {
  check_dtypes("scatter_add", index, dst, src);
  ElementViews v{at_least_1d(dst), at_least_1d(index), at_least_1d(src)};
  check_index_fits("scatter_add", v.index, dim, v.a, "dst");
  check_index_fits("scatter_add", v.index, dim, v.b, "src", /*skip_dim=*/false);
  find_rows(v, dim);
  return v;
}

// The fast gather / scatter_add set-up: index as [P, S, Q] (S of a's dim), its values checked.
struct RowPlan {
  PSQ iv;
  int64_t S;
  const int64_t* idx;
};
RowPlan row_plan(const char* op, const ElementViews& v, int dim) {
  RowPlan r{split_at(v.index.shape, dim), v.a.shape[dim], v.index.ptr<int64_t>()};
  check_indices(op, r.idx, v.index.numel(), dim, r.S);
  return r;
}

// Contiguous index values: the pointer itself, or a packed copy in `storage`.
const int64_t* contiguous_index(const TensorView& index, std::vector<int64_t>& storage) {
  if (index.is_contiguous()) return index.ptr<int64_t>();
  storage = read_index(index);
  return storage.data();
}

// d[0..n) += s[0..n)
template <class T> void add_row(T* d, const T* s, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = B::size;
  int64_t j = 0;
  for (; j + W <= n; j += W)
    (B::load_unaligned(d + j) + B::load_unaligned(s + j)).store_unaligned(d + j);
  for (; j < n; ++j) d[j] += s[j];
}

// Work split for the accumulating kernels: tasks are (p, column chunk) pairs, so no two tasks
// touch the same destination element. With few outer rows (dim 0: P == 1, the embedding
// backward) the columns are split instead so both cores still have work.
struct ColumnChunks {
  int64_t n_chunks, chunk;
};
ColumnChunks column_chunks(int64_t P, int64_t Q, int64_t work) {
  int threads = work >= kParallelGrain ? omp_get_max_threads() : 1;
  if (P >= threads) return {1, Q};
  // At least 64 columns per chunk (whole cache lines, full vectors), rounded to 16.
  int64_t want = (threads + P - 1) / P;
  int64_t chunk = std::max<int64_t>(64, ((Q + want - 1) / want + 15) / 16 * 16);
  return {(Q + chunk - 1) / chunk, chunk};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Fast kernels. The typed loops live in templates because OpenMP pragmas cannot sit inside
// the dispatch macro's argument.

namespace {

// f(p, q0, q1) for every task (slice p, columns [q0, q1)) of a [P, *, Q] destination, in
// parallel. A task that writes only columns [q0, q1) of slice p races with no other, and
// keeps the reference's order of accumulation within its columns.
template <class F> void for_column_tasks(int64_t P, int64_t Q, int64_t work, const F& f) {
  const ColumnChunks cc = column_chunks(P, Q, work);
#pragma omp parallel for schedule(static) if (P * cc.n_chunks > 1)
  for (int64_t t = 0; t < P * cc.n_chunks; ++t) {
    const int64_t p = t / cc.n_chunks, q0 = (t % cc.n_chunks) * cc.chunk;
    f(p, q0, std::min(Q, q0 + cc.chunk));
  }
}

// d [P, S, Q] += rows of s [P, K, Q] scattered by idx[K] along S: each task adds the K source
// rows in index order, so duplicates accumulate as in the reference.
template <class T>
void index_add_rows(T* d, const T* s, const int64_t* idx, PSQ dst, int64_t K) {
  const int64_t P = dst.P, S = dst.S, Q = dst.Q;
  for_column_tasks(P, Q, P * K * Q, [&](int64_t p, int64_t q0, int64_t q1) {
    for (int64_t k = 0; k < K; ++k)
      add_row(d + (p * S + idx[k]) * Q + q0, s + (p * K + k) * Q + q0, q1 - q0);
  });
}

// o[p, j, q] = s[p, idx[p, j, q], q];  s [P, S, Q], idx / o [P, J, Q]
template <class T> void gather_rows(const T* s, const int64_t* idx, T* o, PSQ ix, int64_t S) {
  const int64_t P = ix.P, J = ix.S, Q = ix.Q;
  if (Q == 1) {
    // Gather along the last dim (e.g. picking target logits): one plain gather per row.
#pragma omp parallel for schedule(static) if (P * J >= kParallelGrain)
    for (int64_t p = 0; p < P; ++p) {
      const T* sp = s + p * S;
      const int64_t* ir = idx + p * J;
      T* orow = o + p * J;
      for (int64_t j = 0; j < J; ++j) orow[j] = sp[ir[j]];
    }
    return;
  }
  // collapse(2): threads share the (p, j) rows even when P is 1 (dim 0).
#pragma omp parallel for collapse(2) schedule(static) if (P * J * Q >= kParallelGrain)
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < J; ++j) {
      const T* sp = s + p * S * Q;
      const int64_t* ir = idx + (p * J + j) * Q;
      T* orow = o + (p * J + j) * Q;
      for (int64_t q = 0; q < Q; ++q) orow[q] = sp[ir[q] * Q + q];
    }
}

// d[p, idx[p, j, q], q] += s[p, j, q];  d [P, S, Q], idx / s [P, J, Q]
template <class T>
void scatter_add_rows(T* d, const int64_t* idx, const T* s, PSQ ix, int64_t S) {
  const int64_t P = ix.P, J = ix.S, Q = ix.Q;
  // Column q of slice p only ever writes column q of dst slice p; j runs in order.
  for_column_tasks(P, Q, P * J * Q, [&](int64_t p, int64_t q0, int64_t q1) {
    T* dp = d + p * S * Q;
    if (Q == 1) {  // scatter along the last dim: a plain scatter per row
      const int64_t* ir = idx + p * J;
      const T* sr = s + p * J;
      for (int64_t j = 0; j < J; ++j) dp[ir[j]] += sr[j];
      return;
    }
    for (int64_t j = 0; j < J; ++j) {
      const int64_t* ir = idx + (p * J + j) * Q;
      const T* sr = s + (p * J + j) * Q;
      for (int64_t q = q0; q < q1; ++q) dp[ir[q] * Q + q] += sr[q];
    }
  });
}

// index_select between strided views whose innermost dims (after `dim`) are unit-stride runs
// in both tensors, e.g. a KV cache's first S positions of a [B, H, capacity, Dh] buffer: one
// memcpy per run of the selected slices. False (nothing written) when the runs would be shorter
// than kMinRun elements; the reference kernel then walks element by element.
bool index_select_runs(const TensorView& src, int dim, const TensorView& index,
                       const TensorView& out) {
  constexpr int64_t kMinRun = 16;
  const int R = src.rank();
  if (dim == R - 1 || src.strides[R - 1] != 1 || out.strides[R - 1] != 1) return false;
  int64_t run = src.shape[R - 1];
  int first = R - 1;  // dims [first, R) form one run
  while (first - 1 > dim && src.strides[first - 1] == run && out.strides[first - 1] == run)
    run *= src.shape[--first];
  if (run < kMinRun) return false;
  std::vector<int64_t> packed;
  const int64_t* idx = contiguous_index(index, packed);
  check_indices("index_select", idx, index.numel(), dim, src.shape[dim]);
  const Shape& os = out.shape;  // the runs are indexed by out's coordinates in dims [0, first)
  int64_t runs = 1;
  for (int d = 0; d < first; ++d) runs *= os[d];
  const size_t esize = dtype_size(src.dtype), run_bytes = size_t(run) * esize;
  const auto* s = static_cast<const std::byte*>(src.data);
  auto* o = static_cast<std::byte*>(out.data);
#pragma omp parallel for schedule(static) if (runs * run >= kParallelGrain)
  for (int64_t r = 0; r < runs; ++r) {
    int64_t rest = r, so = 0, oo = 0;
    for (int d = first - 1; d >= 0; --d) {
      const int64_t c = rest % os[d];
      rest /= os[d];
      so += (d == dim ? idx[c] : c) * src.strides[d];
      oo += c * out.strides[d];
    }
    std::memcpy(o + oo * int64_t(esize), s + so * int64_t(esize), run_bytes);
  }
  return true;
}

}  // namespace

void index_select(const TensorView& src_, int dim, const TensorView& index,
                  const TensorView& out_) {
  const SelectViews v = checked_select("index_select", src_, dim, index, out_, "src", "out");
  const TensorView &src = v.full, &out = v.sel;
  if (!src.is_contiguous() || !out.is_contiguous()) {
    if (index_select_runs(src, dim, index, out)) return;
    return ref::index_select(src_, dim, index, out_);
  }
  // src [P, S, Q] -> out [P, K, Q]
  const PSQ sv = split_at(src.shape, dim);
  const int64_t P = sv.P, S = sv.S, K = index.numel();
  std::vector<int64_t> packed;
  const int64_t* idx = contiguous_index(index, packed);
  check_indices("index_select", idx, K, dim, S);

  // One memcpy per selected row (any dtype: it is a byte copy); the rows are independent.
  const size_t row_bytes = size_t(sv.Q) * dtype_size(src.dtype);
  const auto* s = static_cast<const std::byte*>(src.data);
  auto* o = static_cast<std::byte*>(out.data);
#pragma omp parallel for schedule(static) if (P * K * sv.Q >= kParallelGrain)
  for (int64_t r = 0; r < P * K; ++r) {
    const int64_t p = r / K, k = r % K;
    std::memcpy(o + r * row_bytes, s + (p * S + idx[k]) * row_bytes, row_bytes);
  }
}

void index_add(const TensorView& dst_, int dim, const TensorView& index, const TensorView& src_) {
  const SelectViews v = checked_select("index_add", dst_, dim, index, src_, "dst", "src");
  const TensorView &dst = v.full, &src = v.sel;
  if (!dst.is_contiguous() || !src.is_contiguous())
    return ref::index_add(dst_, dim, index, src_);
  // dst [P, S, Q] += scattered src [P, K, Q]
  const PSQ dv = split_at(dst.shape, dim);
  const int64_t K = index.numel();
  std::vector<int64_t> packed;
  const int64_t* idx = contiguous_index(index, packed);
  check_indices("index_add", idx, K, dim, dv.S);
  GRAFT_DISPATCH_FLOAT(dst.dtype, "index_add", T,
                       [&] { index_add_rows(dst.ptr<T>(), src.ptr<T>(), idx, dv, K); });
}

void gather(const TensorView& src_, int dim, const TensorView& index_, const TensorView& out_) {
  const ElementViews v = checked_gather(src_, dim, index_, out_);
  if (!v.rows) return ref::gather(src_, dim, index_, out_);
  const RowPlan r = row_plan("gather", v, dim);
  GRAFT_DISPATCH_ALL(v.a.dtype, "gather", T,
                     [&] { gather_rows(v.a.ptr<T>(), r.idx, v.b.ptr<T>(), r.iv, r.S); });
}

void scatter_add(const TensorView& dst_, int dim, const TensorView& index_,
                 const TensorView& src_) {
  const ElementViews v = checked_scatter_add(dst_, dim, index_, src_);
  if (!v.rows) return ref::scatter_add(dst_, dim, index_, src_);
  const RowPlan r = row_plan("scatter_add", v, dim);
  GRAFT_DISPATCH_FLOAT(v.a.dtype, "scatter_add", T,
                       [&] { scatter_add_rows(v.a.ptr<T>(), r.idx, v.b.ptr<T>(), r.iv, r.S); });
}

// ---------------------------------------------------------------------------------------------
// Reference kernels: one element at a time, any strides. Each loop walks one tensor with
// for_each_offset and recovers the coordinates of the others from the linear index.

// Reference index_select / index_add: f(sel_off, full_off) for every element of `sel` (any
// strides), full_off being the element of `full` it selects (dim -> idx[its coordinate]).
template <class F>
void for_each_selected(const TensorView& full, int dim, const std::vector<int64_t>& idx,
                       const TensorView& sel, F f) {
  int64_t c[kMaxDims];
  for_each_offset(sel.shape, sel.strides, [&](int64_t i, int64_t off) {
    unravel(i, sel.shape, c);
    c[dim] = idx[c[dim]];
    f(off, offset_of(c, full.strides));
  });
}

// Reference gather / scatter_add: f(other_off, full_off) for every element of `index` (any
// strides): other_off at the index element's coordinates in `other`, full_off there with dim
// -> the index value, checked against full's dim just before it is used.
template <class F>
void for_each_indexed(const char* op, const TensorView& full, int dim, const TensorView& index,
                      const TensorView& other, F f) {
  const int64_t* ip = index.ptr<int64_t>();
  int64_t c[kMaxDims];
  for_each_offset(index.shape, index.strides, [&](int64_t i, int64_t off) {
    unravel(i, index.shape, c);
    const int64_t other_off = offset_of(c, other.strides);
    c[dim] = ip[off];
    check_index(op, c[dim], dim, full.shape[dim]);
    f(other_off, offset_of(c, full.strides));
  });
}

namespace ref {

void index_select(const TensorView& src_, int dim, const TensorView& index,
                  const TensorView& out_) {
  const SelectViews v = checked_select("index_select", src_, dim, index, out_, "src", "out");
  const TensorView &src = v.full, &out = v.sel;
  const std::vector<int64_t> idx = read_index(index);
  check_indices("index_select", idx.data(), idx.size(), dim, src.shape[dim]);
  GRAFT_DISPATCH_ALL(src.dtype, "index_select", T, [&] {
    const T* s = src.ptr<T>();
    T* o = out.ptr<T>();
    for_each_selected(src, dim, idx, out,
                      [&](int64_t o_off, int64_t s_off) { o[o_off] = s[s_off]; });
  });
}

void index_add(const TensorView& dst_, int dim, const TensorView& index, const TensorView& src_) {
  const SelectViews v = checked_select("index_add", dst_, dim, index, src_, "dst", "src");
  const TensorView &dst = v.full, &src = v.sel;
  const std::vector<int64_t> idx = read_index(index);
  check_indices("index_add", idx.data(), idx.size(), dim, dst.shape[dim]);
  GRAFT_DISPATCH_FLOAT(dst.dtype, "index_add", T, [&] {
    T* d = dst.ptr<T>();
    const T* s = src.ptr<T>();
    for_each_selected(dst, dim, idx, src,
                      [&](int64_t s_off, int64_t d_off) { d[d_off] += s[s_off]; });
  });
}

void gather(const TensorView& src_, int dim, const TensorView& index_, const TensorView& out_) {
  const ElementViews v = checked_gather(src_, dim, index_, out_);
  const TensorView &src = v.a, &index = v.index, &out = v.b;
  GRAFT_DISPATCH_ALL(src.dtype, "gather", T, [&] {
    const T* s = src.ptr<T>();
    T* o = out.ptr<T>();
    for_each_indexed("gather", src, dim, index, out,
                     [&](int64_t o_off, int64_t s_off) { o[o_off] = s[s_off]; });
  });
}

void scatter_add(const TensorView& dst_, int dim, const TensorView& index_,
                 const TensorView& src_) {
  const ElementViews v = checked_scatter_add(dst_, dim, index_, src_);
  const TensorView &dst = v.a, &index = v.index, &src = v.b;
  GRAFT_DISPATCH_FLOAT(dst.dtype, "scatter_add", T, [&] {
    T* d = dst.ptr<T>();
    const T* s = src.ptr<T>();
    for_each_indexed("scatter_add", dst, dim, index, src,
                     [&](int64_t s_off, int64_t d_off) { d[d_off] += s[s_off]; });
  });
}

}  // namespace ref
}  // namespace graft::cpu
