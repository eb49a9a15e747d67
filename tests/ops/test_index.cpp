// Indexing kernels: index_select, index_add, gather, scatter_add. Small hand-computed cases pin
// the torch semantics of the reference kernels; the fast kernels are then compared with the
// reference over several shapes, dims, dtypes and layouts (contiguous, padded, transposed).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tests/ops/kernel_test_util.h"

using namespace graft::testing;  // Buf, check_close, check_error, DType, Shape, TensorView, cpu

namespace {

enum class Layout { contiguous, padded, transposed };

// A tensor of logical shape `shape` in one of three layouts, over its own buffer: padded uses
// every other element of the last dim; transposed reverses the dims of the buffer.
struct Strided {
  Buf buf;
  TensorView v;
  Strided(const Shape& shape, DType dt, Layout layout) {
    const int r = shape.size();
    Shape mem = shape;
    if (layout == Layout::padded && r) mem[r - 1] *= 2;
    if (layout == Layout::transposed) std::reverse(mem.begin(), mem.end());
    buf = Buf(mem, dt);
    v = buf.v;
    v.shape = shape;
    if (layout == Layout::padded && r) v.strides[r - 1] = 2;
    if (layout == Layout::transposed) std::reverse(v.strides.begin(), v.strides.end());
  }
  Strided& rand(double lo, double hi, uint64_t seed) {
    buf.rand(lo, hi, seed);
    return *this;
  }
};

// A deep copy (same layout, separate memory).
Strided clone(const Strided& s) {
  Strided c = s;
  c.buf.mem = std::make_shared<std::vector<std::byte>>(*s.buf.mem);
  const auto shift = static_cast<std::byte*>(s.v.data) - s.buf.mem->data();
  c.buf.v.data = c.buf.mem->data();
  c.v.data = c.buf.mem->data() + shift;
  return c;
}

// Random values suited to the dtype: floats in [-2, 2), ints in [-50, 50), bools.
Strided data(const Shape& shape, DType dt, Layout layout, uint64_t seed) {
  Strided s(shape, dt, layout);
  if (dt == DType::i64) s.rand(-50, 50, seed);
  else if (dt == DType::b8) s.rand(0, 1, seed);
  else s.rand(-2, 2, seed);
  return s;
}

// Indices uniform in [0, size) (so duplicates occur whenever numel > size).
Strided indices(const Shape& shape, int64_t size, Layout layout, uint64_t seed) {
  return Strided(shape, DType::i64, layout).rand(0, double(size), seed);
}

void check_values(const Buf& b, std::vector<double> expect) {
  REQUIRE(b.numel() == int64_t(expect.size()));
  for (int64_t i = 0; i < b.numel(); ++i) {
    CAPTURE(i);
    CHECK(b.at(i) == expect[i]);
  }
}

bool same_bytes(const Buf& a, const Buf& b) {
  return a.mem->size() == b.mem->size() &&
         std::memcmp(a.mem->data(), b.mem->data(), a.mem->size()) == 0;
}

Shape with_dim(Shape s, int dim, int64_t size) {
  s[dim] = size;
  return s;
}

constexpr DType kAll[] = {DType::f32, DType::f64, DType::i64, DType::b8};
constexpr DType kFloat[] = {DType::f32, DType::f64};
const std::vector<Layout> kLayouts = {Layout::contiguous, Layout::padded, Layout::transposed};

// Tolerance for accumulations compared across implementations.
double tol(DType dt) { return dt == DType::f32 ? 1e-5 : 1e-12; }

// The four kernels of one implementation (fast or reference).
struct Kernels {
  const char* name;
  decltype(&cpu::index_select) index_select;
  decltype(&cpu::index_add) index_add;
  decltype(&cpu::gather) gather;
  decltype(&cpu::scatter_add) scatter_add;
};
const Kernels kFast{"fast", cpu::index_select, cpu::index_add, cpu::gather, cpu::scatter_add};
const Kernels kRef{"ref", cpu::ref::index_select, cpu::ref::index_add, cpu::ref::gather,
                   cpu::ref::scatter_add};

struct Case {
  Shape shape;  // src for index_select, dst for index_add, index for gather / scatter_add
  int dim;
  int64_t n;    // number of indices (select / add) or size of the other tensor along dim
};

// Runs `check(dt, c, l)` for every dtype, case and choice of one layout from each of
// `layout_lists` (l[i] from layout_lists[i]; the last list varies fastest), all CAPTUREd.
template <class DTypes, class Cases, class Check>
void for_each_case(const DTypes& dtypes, const Cases& cases,
                   const std::vector<std::vector<Layout>>& layout_lists, Check check) {
  for (DType dt : dtypes)
    for (const Case& c : cases) {
      std::vector<size_t> at(layout_lists.size(), 0);
      for (bool more = true; more;) {
        std::vector<Layout> l;
        std::string names;
        for (size_t i = 0; i < at.size(); ++i) {
          l.push_back(layout_lists[i][at[i]]);
          names += std::to_string(int(l.back())) + (i + 1 < at.size() ? "," : "");
        }
        CAPTURE(dt);
        CAPTURE(c.shape.str());
        CAPTURE(c.dim);
        CAPTURE(names);
        check(dt, c, l);
        // next combination: the last list steps first, carrying into the ones before it
        more = false;
        for (size_t i = at.size(); i-- > 0 && !more;) {
          if (++at[i] < layout_lists[i].size()) more = true;
          else at[i] = 0;
        }
      }
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reference semantics on hand-computed examples

TEST_CASE("index: reference semantics on small examples") {
  for (const Kernels* be : {&kRef, &kFast}) {
    CAPTURE(be->name);
    Buf src = buf_of({3, 2}, DType::f32, {1, 2, 3, 4, 5, 6});
    Buf idx = buf_of({3}, DType::i64, {2, 0, 2});
    // index_select: rows 2, 0, 2 / columns 1, 1, 0.
    Buf rows(Shape{3, 2}, DType::f32), cols(Shape{3, 3}, DType::f32);
    be->index_select(src.v, 0, idx.v, rows.v);
    check_values(rows, {5, 6, 1, 2, 5, 6});
    Buf idx2 = buf_of({3}, DType::i64, {1, 1, 0});
    be->index_select(src.v, 1, idx2.v, cols.v);
    check_values(cols, {2, 2, 1, 4, 4, 3, 6, 6, 5});
    // index_add: duplicate index 0 accumulates rows 0 and 2 of src.
    Buf dst = buf_of({3, 2}, DType::f32, {0, 0, 0, 0, 10, 10});
    Buf idx3 = buf_of({3}, DType::i64, {0, 2, 0});
    be->index_add(dst.v, 0, idx3.v, src.v);
    check_values(dst, {6, 8, 0, 0, 13, 14});
    // gather (torch docs): [[1, 2], [3, 4]] along dim 1 with [[0, 0], [1, 0]].
    Buf t = buf_of({2, 2}, DType::f64, {1, 2, 3, 4});
    Buf gi = buf_of({2, 2}, DType::i64, {0, 0, 1, 0});
    Buf g(Shape{2, 2}, DType::f64);
    be->gather(t.v, 1, gi.v, g.v);
    check_values(g, {1, 1, 4, 3});
    // scatter_add (torch docs): ones(2, 5) into zeros(3, 5) along dim 0 with [[0, 1, 2, 0, 0]]
    // (index smaller than src).
    Buf ones = buf_of({2, 5}, DType::f64, std::vector<double>(10, 1.0));
    Buf si = buf_of({1, 5}, DType::i64, {0, 1, 2, 0, 0});
    Buf acc = buf_of({3, 5}, DType::f64, std::vector<double>(15, 0.0));
    be->scatter_add(acc.v, 0, si.v, ones.v);
    check_values(acc, {1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0});
    // scatter_add along dim 1 with duplicates in a row.
    Buf acc2 = buf_of({2, 3}, DType::f64, std::vector<double>(6, 0.0));
    Buf si2 = buf_of({2, 4}, DType::i64, {0, 0, 2, 0, 1, 1, 1, 2});
    Buf s2 = buf_of({2, 4}, DType::f64, {1, 2, 3, 4, 5, 6, 7, 8});
    be->scatter_add(acc2.v, 1, si2.v, s2.v);
    check_values(acc2, {7, 0, 3, 0, 18, 8});
  }
}

TEST_CASE("index: rank-0 tensors act as shape [1]") {
  for (const Kernels* be : {&kFast, &kRef}) {
    Buf s = buf_of({}, DType::f64, {3.5});
    Buf idx = buf_of({2}, DType::i64, {0, 0});
    Buf out(Shape{2}, DType::f64);
    be->index_select(s.v, 0, idx.v, out.v);
    check_values(out, {3.5, 3.5});
    Buf gi = buf_of({}, DType::i64, {0});
    Buf g(Shape{}, DType::f64);
    be->gather(s.v, 0, gi.v, g.v);
    check_values(g, {3.5});
  }
}

// ---------------------------------------------------------------------------------------------
// Fast vs reference

TEST_CASE("index_select: fast == reference") {
  const Case cases[] = {
      {{7, 5}, 0, 9},     {{7, 5}, 1, 3},       {{4, 6, 3}, 1, 10}, {{4, 6, 3}, 2, 5},
      {{4, 6, 3}, 0, 0},  {{5}, 0, 8},          {{2, 3, 4, 5}, 2, 6},
      {{1000, 64}, 0, 5000},  // embedding-sized: parallel row copies
      {{16, 40, 70}, 1, 60},  // P > 1, parallel
  };
  // layouts: src, index
  for_each_case(kAll, cases, {kLayouts, {Layout::contiguous, Layout::padded}},
                [](DType dt, const Case& c, const std::vector<Layout>& l) {
                  Strided src = data(c.shape, dt, l[0], 3);
                  Strided idx = indices(Shape{c.n}, c.shape[c.dim], l[1], 4);
                  const Shape out_shape = with_dim(c.shape, c.dim, c.n);
                  Buf fast(out_shape, dt), ref(out_shape, dt);
                  cpu::index_select(src.v, c.dim, idx.v, fast.v);
                  cpu::ref::index_select(src.v, c.dim, idx.v, ref.v);
                  CHECK(same_bytes(fast, ref));
                });
}

TEST_CASE("index_select: strided output") {
  Strided src = data({6, 4}, DType::f32, Layout::contiguous, 1);
  Strided idx = indices(Shape{5}, 6, Layout::contiguous, 2);
  for (Layout lo : {Layout::padded, Layout::transposed}) {
    Strided fast(Shape{5, 4}, DType::f32, lo), ref(Shape{5, 4}, DType::f32, lo);
    fast.buf.rand(0, 1, 9);
    ref.buf.rand(0, 1, 9);
    cpu::index_select(src.v, 0, idx.v, fast.v);
    cpu::ref::index_select(src.v, 0, idx.v, ref.v);
    CHECK(same_bytes(fast.buf, ref.buf));
    // Spot check one element through the view: out[2, 3] = src[idx[2], 3].
    const int64_t k = idx.buf.ptr<int64_t>()[2];
    CHECK(fast.v.ptr<float>()[2 * fast.v.strides[0] + 3 * fast.v.strides[1]] ==
          src.buf.ptr<float>()[k * 4 + 3]);
  }
}

TEST_CASE("index_select: narrowed views (a KV cache's first S positions) copy as runs") {
  // src [4, 3, 6, 20] = the first 6 of 10 positions of a [4, 3, 10, 20] buffer; out likewise a
  // narrowed buffer, or contiguous. The runs are [20] (src narrowed at dim 2) or [6, 20].
  for (DType dt : {DType::f32, DType::f64, DType::i64}) {
    for (int dim : {0, 1, 2}) {
      Buf buf(Shape{4, 3, 10, 20}, dt);
      buf.rand(-2, 2, 5);
      TensorView src = buf.v;
      src.shape = Shape{4, 3, 6, 20};
      const Shape out_shape = with_dim(src.shape, dim, 7);
      Strided idx = indices(Shape{7}, src.shape[dim], Layout::contiguous, 6);
      Buf fast(out_shape, dt), ref(out_shape, dt);
      cpu::index_select(src, dim, idx.v, fast.v);
      cpu::ref::index_select(src, dim, idx.v, ref.v);
      CHECK(same_bytes(fast, ref));
      Shape wide = out_shape;  // a narrowed output too: only its first 6 positions of dim 2
      wide[2] = dim == 2 ? 9 : 10;
      Buf out_fast(wide, dt), out_ref(wide, dt);
      out_fast.rand(0, 1, 7);
      out_ref.rand(0, 1, 7);
      TensorView of = out_fast.v, orf = out_ref.v;
      of.shape = orf.shape = out_shape;
      cpu::index_select(src, dim, idx.v, of);
      cpu::ref::index_select(src, dim, idx.v, orf);
      CHECK(same_bytes(out_fast, out_ref));  // the positions past the view stay untouched
    }
  }
  // one value by hand: out[1, 2, 5, 19] = src[idx[1], 2, 5, 19] (dim 0)
  Buf buf(Shape{4, 3, 10, 20}, DType::f32);
  buf.rand(-2, 2, 8);
  TensorView src = buf.v;
  src.shape = Shape{4, 3, 6, 20};
  Strided idx = indices(Shape{2}, 4, Layout::contiguous, 9);
  Buf out(Shape{2, 3, 6, 20}, DType::f32);
  cpu::index_select(src, 0, idx.v, out.v);
  const int64_t k = idx.buf.ptr<int64_t>()[1];
  CHECK(out.ptr<float>()[((1 * 3 + 2) * 6 + 5) * 20 + 19] ==
        buf.ptr<float>()[((k * 3 + 2) * 10 + 5) * 20 + 19]);
}

TEST_CASE("index_add: fast == reference, duplicates accumulate") {
  const Case cases[] = {
      {{7, 5}, 0, 20},   {{7, 5}, 1, 12},       {{4, 6, 3}, 1, 30}, {{4, 6, 3}, 2, 7},
      {{6}, 0, 40},      {{4, 6, 3}, 0, 0},
      {{1000, 64}, 0, 5000},   // embedding backward: P == 1, columns split over threads
      {{50, 700}, 0, 400},     // P == 1, uneven column chunks
      {{3, 50, 300}, 1, 200},  // P > 1
  };
  // layouts: dst, src
  for_each_case(kFloat, cases, {kLayouts, {Layout::contiguous, Layout::transposed}},
                [](DType dt, const Case& c, const std::vector<Layout>& l) {
                  Strided dst = data(c.shape, dt, l[0], 5);
                  Strided src = data(with_dim(c.shape, c.dim, c.n), dt, l[1], 6);
                  Strided idx = indices(Shape{c.n}, c.shape[c.dim], Layout::contiguous, 7);
                  Strided fast = clone(dst), ref = clone(dst);
                  cpu::index_add(fast.v, c.dim, idx.v, src.v);
                  cpu::ref::index_add(ref.v, c.dim, idx.v, src.v);
                  check_close(fast.buf, ref.buf, tol(dt), tol(dt));
                });
}

TEST_CASE("index_add / scatter_add: results do not depend on the thread count") {
  const int threads = omp_get_max_threads();
  // dim 0 (P == 1) with 300 columns: the multi-thread run splits the columns.
  Strided src = data({4000, 300}, DType::f32, Layout::contiguous, 1);
  Strided idx = indices(Shape{4000}, 100, Layout::contiguous, 2);  // ~40 repeats per row
  Strided sidx = indices(Shape{4000, 300}, 100, Layout::contiguous, 3);
  Buf out[2], sout[2];
  for (int t = 0; t < 2; ++t) {
    omp_set_num_threads(t == 0 ? 1 : std::max(2, threads));
    out[t] = Buf(Shape{100, 300}, DType::f32).rand(-1, 1, 4);
    sout[t] = Buf(Shape{100, 300}, DType::f32).rand(-1, 1, 4);
    cpu::index_add(out[t].v, 0, idx.v, src.v);
    cpu::scatter_add(sout[t].v, 0, sidx.v, src.v);
  }
  omp_set_num_threads(threads);
  CHECK(same_bytes(out[0], out[1]));
  CHECK(same_bytes(sout[0], sout[1]));
}

TEST_CASE("gather: fast == reference") {
  // shape = index shape; n = src size along dim.
  const Case cases[] = {
      {{7, 5}, 0, 9},         {{7, 5}, 1, 8},   {{4, 6, 3}, 1, 10}, {{4, 6, 3}, 2, 5},
      {{4, 6, 3}, 0, 2},      {{9}, 0, 4},
      {{64, 512}, 1, 1000},   // gather along a vocab dim, parallel
      {{300, 200}, 0, 50},    // dim 0, parallel
  };
  // layouts: src, index
  for_each_case(kAll, cases, {kLayouts, {Layout::contiguous, Layout::padded}},
                [](DType dt, const Case& c, const std::vector<Layout>& l) {
                  Strided src = data(with_dim(c.shape, c.dim, c.n), dt, l[0], 8);
                  Strided idx = indices(c.shape, c.n, l[1], 9);
                  Buf fast(c.shape, dt), ref(c.shape, dt);
                  cpu::gather(src.v, c.dim, idx.v, fast.v);
                  cpu::ref::gather(src.v, c.dim, idx.v, ref.v);
                  CHECK(same_bytes(fast, ref));
                });
}

TEST_CASE("gather: src larger than index in the other dims") {
  // index [3, 4] into src [5, 9] along dim 1: rows beyond 3 of src are never read.
  for (DType dt : kAll) {
    Strided src = data({5, 9}, dt, Layout::contiguous, 1);
    Strided idx = indices({3, 4}, 9, Layout::contiguous, 2);
    Buf fast(Shape{3, 4}, dt), ref(Shape{3, 4}, dt);
    cpu::gather(src.v, 1, idx.v, fast.v);
    cpu::ref::gather(src.v, 1, idx.v, ref.v);
    CHECK(same_bytes(fast, ref));
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        CHECK(fast.at(i * 4 + j) == src.buf.at(i * 9 + idx.buf.ptr<int64_t>()[i * 4 + j]));
  }
}

TEST_CASE("scatter_add: fast == reference, duplicates accumulate") {
  // shape = index (and src) shape; n = dst size along dim.
  const Case cases[] = {
      {{7, 5}, 0, 3},        {{7, 5}, 1, 2},    {{4, 6, 3}, 1, 2}, {{4, 6, 3}, 2, 4},
      {{4, 6, 3}, 0, 1},     {{30}, 0, 4},
      {{400, 300}, 0, 50},   // P == 1, columns split over threads
      {{64, 1000}, 1, 100},  // P > 1
  };
  // layouts: dst, src, index
  for_each_case(kFloat, cases,
                {{Layout::contiguous, Layout::transposed}, {Layout::contiguous, Layout::padded},
                 {Layout::contiguous, Layout::transposed}},
                [](DType dt, const Case& c, const std::vector<Layout>& l) {
                  Strided dst = data(with_dim(c.shape, c.dim, c.n), dt, l[0], 10);
                  Strided src = data(c.shape, dt, l[1], 11);
                  Strided idx = indices(c.shape, c.n, l[2], 12);
                  Strided fast = clone(dst), ref = clone(dst);
                  cpu::scatter_add(fast.v, c.dim, idx.v, src.v);
                  cpu::ref::scatter_add(ref.v, c.dim, idx.v, src.v);
                  check_close(fast.buf, ref.buf, tol(dt), tol(dt));
                });
}

TEST_CASE("scatter_add: src larger than index") {
  Strided dst = data({4, 6}, DType::f64, Layout::contiguous, 1);
  Strided src = data({5, 6}, DType::f64, Layout::contiguous, 2);
  Strided idx = indices({3, 6}, 4, Layout::contiguous, 3);
  Strided fast = clone(dst), ref = clone(dst);
  cpu::scatter_add(fast.v, 0, idx.v, src.v);
  cpu::ref::scatter_add(ref.v, 0, idx.v, src.v);
  check_close(fast.buf, ref.buf, 1e-12, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// Out-of-range indices

TEST_CASE("index: out-of-range index throws graft::Error naming op, index and range") {
  for (const Kernels* be : {&kFast, &kRef}) {
    CAPTURE(be->name);
    for (int64_t bad : {int64_t(5), int64_t(-1), int64_t(1) << 40}) {
      CAPTURE(bad);
      const std::string b = std::to_string(bad);
      Buf src = Buf(Shape{5, 3}, DType::f32).rand(0, 1);
      Buf idx = buf_of({4}, DType::i64, {0, 4, double(bad), 1});
      Buf out(Shape{4, 3}, DType::f32);
      check_error([&] { be->index_select(src.v, 0, idx.v, out.v); },
                  {"index_select", b, "0..4"});

      Buf dst = Buf(Shape{5, 3}, DType::f32).rand(0, 1);
      Buf dst0 = dst;
      dst0.mem = std::make_shared<std::vector<std::byte>>(*dst.mem);
      Buf add = Buf(Shape{4, 3}, DType::f32).rand(0, 1);
      check_error([&] { be->index_add(dst.v, 0, idx.v, add.v); }, {"index_add", b, "0..4"});
      // index_add validates before writing: dst is untouched.
      CHECK(std::memcmp(dst.mem->data(), dst0.mem->data(), dst.mem->size()) == 0);

      // gather / scatter_add along dim 1 (size 3): index [2, 2].
      Buf gidx = buf_of({2, 2}, DType::i64, {0, 2, double(bad), 1});
      Buf gout(Shape{2, 2}, DType::f32);
      check_error([&] { be->gather(src.v, 1, gidx.v, gout.v); }, {"gather", b, "0..2"});
      Buf sdst = Buf(Shape{2, 3}, DType::f32).rand(0, 1);
      Buf ssrc = Buf(Shape{2, 2}, DType::f32).rand(0, 1);
      check_error([&] { be->scatter_add(sdst.v, 1, gidx.v, ssrc.v); },
                  {"scatter_add", b, "0..2"});
    }
  }
}

TEST_CASE("index: non-int64 index and mismatched dtypes are rejected") {
  Buf src = Buf(Shape{5, 3}, DType::f32).rand(0, 1);
  Buf fidx = Buf(Shape{2}, DType::f32);
  Buf out(Shape{2, 3}, DType::f32), out64(Shape{2, 3}, DType::f64);
  Buf idx = buf_of({2}, DType::i64, {0, 1});
  CHECK_THROWS_AS(cpu::index_select(src.v, 0, fidx.v, out.v), graft::Error);
  CHECK_THROWS_AS(cpu::index_select(src.v, 0, idx.v, out64.v), graft::Error);
  Buf ib(Shape{5, 3}, DType::i64);
  Buf isrc(Shape{2, 3}, DType::i64);
  CHECK_THROWS_AS(cpu::index_add(ib.v, 0, idx.v, isrc.v), graft::Error);  // index_add: floats only
}

TEST_CASE("index: shapes that break the contract are rejected, not overrun") {
  for (const Kernels* be : {&kFast, &kRef}) {
    CAPTURE(be->name);
    Buf src = Buf(Shape{5, 3}, DType::f32).rand(0, 1);
    Buf idx = buf_of({2}, DType::i64, {0, 1});
    Buf small(Shape{1, 3}, DType::f32), wide(Shape{2, 4}, DType::f32);
    check_error([&] { be->index_select(src.v, 0, idx.v, small.v); }, {"index_select", "[1, 3]"});
    check_error([&] { be->index_add(src.v, 0, idx.v, wide.v); }, {"index_add", "[2, 4]"});
    check_error([&] { be->index_select(src.v, 2, idx.v, small.v); }, {"index_select", "dim 2"});
    // gather: index [2, 4] does not fit src [5, 3] outside dim 0; out must match index.
    Buf gidx = buf_of({2, 4}, DType::i64, {0, 0, 0, 0, 0, 0, 0, 0});
    Buf gout(Shape{2, 4}, DType::f32);
    check_error([&] { be->gather(src.v, 0, gidx.v, gout.v); }, {"gather", "[2, 4]"});
    Buf gidx2 = buf_of({2, 3}, DType::i64, {0, 0, 0, 0, 0, 0});
    check_error([&] { be->gather(src.v, 0, gidx2.v, small.v); }, {"gather", "[1, 3]"});
    // scatter_add: src smaller than index.
    Buf dst = Buf(Shape{5, 3}, DType::f32).rand(0, 1);
    check_error([&] { be->scatter_add(dst.v, 0, gidx2.v, small.v); }, {"scatter_add", "src"});
  }
}
