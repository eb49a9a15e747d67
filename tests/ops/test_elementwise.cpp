// Fast elementwise kernels (graft::cpu) against the scalar reference kernels (graft::cpu::ref):
// every op of every X-macro list, float32 and float64, contiguous / strided / broadcast inputs,
// sizes that are not multiples of the SIMD width and sizes on both sides of kParallelGrain.
#include <string>
#include <vector>

#include "tests/ops/kernel_test_util.h"

namespace graft::testing {
namespace {

// The kernels are called directly (not through the Backend tables) so this suite needs only
// ops/cpu/elementwise.cpp.
namespace fast = ::graft::cpu;
namespace ref = ::graft::cpu::ref;

// check_close tolerance for "must be equal" (atol 0 would divide 0 by 0 on equal values).
constexpr double kExact = 1e-300;

#define GRAFT_LIST_UNARY(name, ...) UnaryOp::name,
#define GRAFT_LIST_BINARY(name, ...) BinaryOp::name,
#define GRAFT_LIST_COMPARE(name, ...) CompareOp::name,
constexpr UnaryOp kUnaryOps[] = {GRAFT_UNARY_OPS(GRAFT_LIST_UNARY)};
constexpr BinaryOp kBinaryOps[] = {GRAFT_BINARY_OPS(GRAFT_LIST_BINARY)};
constexpr CompareOp kCompareOps[] = {GRAFT_COMPARE_OPS(GRAFT_LIST_COMPARE)};
#undef GRAFT_LIST_UNARY
#undef GRAFT_LIST_BINARY
#undef GRAFT_LIST_COMPARE

constexpr DType kFloat[] = {DType::f32, DType::f64};
constexpr DType kAll[] = {DType::f32, DType::f64, DType::i64, DType::b8};

// Sizes: 1, 7, 33 (below/not multiples of the SIMD width), 100003 (above kParallelGrain,
// prime), 2-D and 3-D shapes small and large.
const std::vector<Shape> kShapes = {{1},      {7},        {33},      {100003},
                                    {37, 29}, {181, 191}, {4, 5, 6}, {3, 40, 300}};

// How an input of a given logical shape is laid out in memory.
enum class Lay { contig, strided, bcast_rows, bcast_cols, scalar };
constexpr Lay kLays[] = {Lay::contig, Lay::strided, Lay::bcast_rows, Lay::bcast_cols, Lay::scalar};
std::string lay_name(Lay l) {
  const char* names[] = {"contig", "strided", "bcast_rows", "bcast_cols", "scalar"};
  return names[int(l)];
}

// A random input viewed with logical shape `shape` and layout `lay`.
In make_in(Lay lay, const Shape& shape, DType dt, double lo, double hi, uint64_t seed) {
  In in;
  const int r = shape.size();
  Shape s = shape;
  switch (lay) {
    case Lay::contig:
      in.buf = Buf(shape, dt);
      in.v = in.buf.v;
      break;
    case Lay::strided:
      if (r == 1) {  // every other element
        in.buf = Buf({2 * shape[0]}, dt);
        in.v = in.buf.v;
        in.v.shape = shape;
        in.v.strides = Strides{2};
      } else {
        in = reversed_layout(shape, dt);
      }
      break;
    case Lay::bcast_rows:  // stride 0 on the first dim
      s[0] = 1;
      in.buf = Buf(s, dt);
      in.v = in.buf.v.broadcast_to(shape);
      break;
    case Lay::bcast_cols:  // stride 0 on the last dim
      s[r - 1] = 1;
      in.buf = Buf(s, dt);
      in.v = in.buf.v.broadcast_to(shape);
      break;
    case Lay::scalar:  // stride 0 everywhere
      in.buf = Buf({1}, dt);
      in.v = in.buf.v.broadcast_to(shape);
      break;
  }
  in.buf.rand(lo, hi, seed);
  return in;
}

// Rounds float contents down to integers so comparisons see ties.
void floor_values(Buf& b) {
  for (int64_t i = 0; i < b.numel(); ++i) {
    if (b.v.dtype == DType::f32) b.ptr<float>()[i] = std::floor(b.ptr<float>()[i]);
    if (b.v.dtype == DType::f64) b.ptr<double>()[i] = std::floor(b.ptr<double>()[i]);
  }
}

double atol_of(DType dt) { return dt == DType::f32 ? 1e-5 : 1e-12; }
double rtol_of(DType dt) { return dt == DType::f32 ? 1e-5 : 1e-10; }

// Input range where the op is defined (and not ill-conditioned).
std::pair<double, double> unary_domain(UnaryOp op) {
  switch (op) {
    case UnaryOp::log:
    case UnaryOp::sqrt:
    case UnaryOp::rsqrt:
    case UnaryOp::pow_scalar: return {0.1, 3.0};
    default: return {-3.0, 3.0};
  }
}

TEST_CASE("elementwise: unary and unary_backward match the reference for every op") {
  for (DType dt : kFloat)
    for (UnaryOp op : kUnaryOps) {
      // pow_scalar has a special case for 2; the other alphas only scale or shift.
      const std::vector<double> alphas =
          op == UnaryOp::pow_scalar ? std::vector<double>{2.0, -1.25, 0.5} : std::vector{1.5};
      auto [lo, hi] = unary_domain(op);
      for (double alpha : alphas)
        for (const Shape& shape : kShapes)
          for (Lay lay : kLays) {
            INFO(std::string(unary_name(op))
                 << " " << std::string(dtype_name(dt)) << " alpha=" << alpha
                 << " shape=" << shape.str() << " " << lay_name(lay));
            In x = make_in(lay, shape, dt, lo, hi, 11);
            Buf y_fast(shape, dt), y_ref(shape, dt);
            fast::unary(op, alpha, x.v, y_fast.v);
            ref::unary(op, alpha, x.v, y_ref.v);
            check_close(y_fast, y_ref, atol_of(dt), rtol_of(dt));

            // backward: dy laid out like x; y is the (contiguous) forward result
            In dy = make_in(lay, shape, dt, -1, 1, 12);
            Buf dx_fast(shape, dt), dx_ref(shape, dt);
            fast::unary_backward(op, alpha, x.v, y_ref.v, dy.v, dx_fast.v);
            ref::unary_backward(op, alpha, x.v, y_ref.v, dy.v, dx_ref.v);
            check_close(dx_fast, dx_ref, atol_of(dt), rtol_of(dt));
          }
    }
}

TEST_CASE("elementwise: binary matches the reference for every op and layout pair") {
  for (DType dt : kFloat)
    for (BinaryOp op : kBinaryOps) {
      // pow: positive base; div: divisor away from 0
      double alo = op == BinaryOp::pow ? 0.1 : -3, ahi = 3;
      double blo = op == BinaryOp::pow ? -2 : op == BinaryOp::div ? 0.5 : -3;
      double bhi = op == BinaryOp::pow ? 2 : 3;
      for (const Shape& shape : kShapes)
        for (Lay la : kLays)
          for (Lay lb : kLays) {
            INFO(std::string(binary_name(op))
                 << " " << std::string(dtype_name(dt)) << " shape=" << shape.str()
                 << " a:" << lay_name(la) << " b:" << lay_name(lb));
            In a = make_in(la, shape, dt, alo, ahi, 21);
            In b = make_in(lb, shape, dt, blo, bhi, 22);
            Buf o_fast(shape, dt), o_ref(shape, dt);
            fast::binary(op, a.v, b.v, o_fast.v);
            ref::binary(op, a.v, b.v, o_ref.v);
            check_close(o_fast, o_ref, atol_of(dt), rtol_of(dt));
          }
    }
}

// Layout pairs for the any-dtype kernels (compare, where, copy): enough to hit the contiguous,
// broadcast and strided paths without the full cross product.
const std::pair<Lay, Lay> kLayPairs[] = {{Lay::contig, Lay::contig},
                                         {Lay::contig, Lay::scalar},
                                         {Lay::scalar, Lay::contig},
                                         {Lay::strided, Lay::bcast_rows},
                                         {Lay::bcast_cols, Lay::strided}};

TEST_CASE("elementwise: compare matches the reference for every op and dtype") {
  for (DType dt : kAll)
    for (CompareOp op : kCompareOps)
      for (const Shape& shape : kShapes)
        for (auto [la, lb] : kLayPairs) {
          INFO(std::string(compare_name(op))
               << " " << std::string(dtype_name(dt)) << " shape=" << shape.str()
               << " a:" << lay_name(la) << " b:" << lay_name(lb));
          In a = make_in(la, shape, dt, -3, 3, 31);
          In b = make_in(lb, shape, dt, -3, 3, 32);
          floor_values(a.buf);  // integer values: plenty of ties for eq/le/ge
          floor_values(b.buf);
          Buf o_fast(shape, DType::b8), o_ref(shape, DType::b8);
          fast::compare(op, a.v, b.v, o_fast.v);
          ref::compare(op, a.v, b.v, o_ref.v);
          check_close(o_fast, o_ref, kExact, 0);
        }
}

TEST_CASE("elementwise: where matches the reference for every dtype") {
  for (DType dt : kAll)
    for (const Shape& shape : kShapes)
      for (Lay lc : {Lay::contig, Lay::strided, Lay::bcast_cols})
        for (auto [la, lb] : kLayPairs) {
          INFO(std::string(dtype_name(dt)) << " shape=" << shape.str() << " cond:" << lay_name(lc)
                                           << " a:" << lay_name(la) << " b:" << lay_name(lb));
          In c = make_in(lc, shape, DType::b8, 0, 1, 41);
          In a = make_in(la, shape, dt, -3, 3, 42);
          In b = make_in(lb, shape, dt, -3, 3, 43);
          Buf o_fast(shape, dt), o_ref(shape, dt);
          fast::where(c.v, a.v, b.v, o_fast.v);
          ref::where(c.v, a.v, b.v, o_ref.v);
          check_close(o_fast, o_ref, kExact, 0);
        }
}

// A destination view of `shape`: contiguous, or strided (transposed / every other element)
// inside a zeroed buffer whose every byte is compared.
In make_dst(bool strided, const Shape& shape, DType dt) {
  In d = make_in(strided ? Lay::strided : Lay::contig, shape, dt, 0, 1, 0);
  std::memset(d.buf.v.data, 0, d.buf.numel() * dtype_size(dt));
  return d;
}

TEST_CASE("elementwise: fill matches the reference for every dtype, contiguous and strided") {
  for (DType dt : kAll)
    for (const Shape& shape : kShapes)
      for (bool strided : {false, true})
        for (double value : {0.0, 1.0, -2.75}) {
          INFO(std::string(dtype_name(dt))
               << " shape=" << shape.str() << " strided=" << strided << " value=" << value);
          In d_fast = make_dst(strided, shape, dt), d_ref = make_dst(strided, shape, dt);
          fast::fill(d_fast.v, value);
          ref::fill(d_ref.v, value);
          check_close(d_fast.buf, d_ref.buf, kExact, 0);
        }
}

TEST_CASE("elementwise: copy matches the reference for every dtype pair and layout") {
  for (DType to : kAll)
    for (DType from : kAll)
      for (const Shape& shape : kShapes)
        for (Lay ls : kLays)
          for (bool strided : {false, true}) {
            INFO(std::string(dtype_name(from))
                 << " -> " << std::string(dtype_name(to)) << " shape=" << shape.str()
                 << " src:" << lay_name(ls) << " dst strided=" << strided);
            In src = make_in(ls, shape, from, -3, 3, 51);
            In d_fast = make_dst(strided, shape, to), d_ref = make_dst(strided, shape, to);
            fast::copy(d_fast.v, src.v);
            ref::copy(d_ref.v, src.v);
            check_close(d_fast.buf, d_ref.buf, kExact, 0);
          }
}

TEST_CASE("elementwise: big rows (streaming stores), misaligned pointers, in place") {
  // Rows above the streaming threshold (4 MB per thread) with outputs that start off a 64-byte
  // boundary, plus in-place use (out aliases an input) on big and tiny tensors.
  for (DType dt : kFloat)
    for (int64_t n : {int64_t(3) << 20, int64_t(5), int64_t(100003)}) {
      INFO(std::string(dtype_name(dt)) << " n=" << n);
      const int64_t shift = 3;  // elements: misaligns every view below
      Buf xb({n + shift}, dt), yb({n + shift}, dt), fb({n + shift}, dt), rb({n + shift}, dt);
      xb.rand(-3, 3, 61);
      yb.rand(-3, 3, 62);
      auto at = [&](const Buf& b, int64_t off) {
        TensorView v = b.v;
        v.shape = Shape{n};
        v.strides = Strides{1};
        v.data = static_cast<std::byte*>(b.v.data) + off * dtype_size(dt);
        return v;
      };
      fast::binary(BinaryOp::mul, at(xb, 1), at(yb, 2), at(fb, shift));
      ref::binary(BinaryOp::mul, at(xb, 1), at(yb, 2), at(rb, shift));
      check_close(fb, rb, atol_of(dt), rtol_of(dt));
      fast::unary(UnaryOp::gelu, 0, at(xb, 0), at(fb, 1));
      ref::unary(UnaryOp::gelu, 0, at(xb, 0), at(rb, 1));
      check_close(fb, rb, atol_of(dt), rtol_of(dt));
      fast::unary_backward(UnaryOp::tanh, 0, at(xb, 2), at(yb, 0), at(xb, 1), at(fb, 2));
      ref::unary_backward(UnaryOp::tanh, 0, at(xb, 2), at(yb, 0), at(xb, 1), at(rb, 2));
      check_close(fb, rb, atol_of(dt), rtol_of(dt));
      // in place: fb = sin(fb), rb = sin(rb); equal before, so equal after
      ref::copy(fb.v, rb.v);
      fast::unary(UnaryOp::sin, 0, at(fb, 1), at(fb, 1));
      ref::unary(UnaryOp::sin, 0, at(rb, 1), at(rb, 1));
      check_close(fb, rb, atol_of(dt), rtol_of(dt));
      fast::binary(BinaryOp::add, at(fb, 0), at(yb, 0), at(fb, 0));
      ref::binary(BinaryOp::add, at(rb, 0), at(yb, 0), at(rb, 0));
      check_close(fb, rb, atol_of(dt), rtol_of(dt));
    }
}

TEST_CASE("elementwise: known values") {
  // A few hand-checked results, so fast and reference cannot both be wrong the same way.
  Buf a({3}, DType::f32), b({3}, DType::f32), o({3}, DType::f32);
  float av[] = {1, -2, 4}, bv[] = {3, 5, 2};
  std::copy(av, av + 3, a.ptr<float>());
  std::copy(bv, bv + 3, b.ptr<float>());
  fast::binary(BinaryOp::sub, a.v, b.v, o.v);
  CHECK(o.ptr<float>()[0] == -2);
  CHECK(o.ptr<float>()[2] == 2);
  fast::binary(BinaryOp::maximum, a.v, b.v, o.v);
  CHECK(o.ptr<float>()[1] == 5);
  fast::unary(UnaryOp::relu, 0, a.v, o.v);
  CHECK(o.ptr<float>()[1] == 0);
  fast::unary(UnaryOp::pow_scalar, 2.0, a.v, o.v);
  CHECK(o.ptr<float>()[1] == 4);
  fast::unary(UnaryOp::gelu, 0, a.v, o.v);
  CHECK(o.ptr<float>()[0] == doctest::Approx(0.8413447).epsilon(1e-6));
  Buf m({3}, DType::b8);
  fast::compare(CompareOp::lt, a.v, b.v, m.v);
  CHECK(m.ptr<bool>()[0]);
  CHECK(!m.ptr<bool>()[2]);
}

TEST_CASE("elementwise: every plain unary op gives its listed value, fast and reference, f64 and f32") {
  // GRAFT_PLAIN_UNARY_OPS carries one (x0, y0) per op, computed outside graft: a functor whose
  // forward is wrong passes the gradchecks (its df may match it) but not this.
  struct Known { UnaryOp op; const char* name; double x0, y0; };
#define GRAFT_KNOWN(name, F, lo, hi, x0, y0) {UnaryOp::name, #name, x0, y0},
  const Known known[] = {GRAFT_PLAIN_UNARY_OPS(GRAFT_KNOWN)};
#undef GRAFT_KNOWN
  for (const Known& k : known) {
    CAPTURE(k.name);
    for (DType dt : kFloat) {
      // 17 elements: the SIMD body and its scalar tail
      Buf x = buf_of({17}, dt, std::vector<double>(17, k.x0)), yf({17}, dt), yr({17}, dt);
      fast::unary(k.op, 0, x.v, yf.v);
      ref::unary(k.op, 0, x.v, yr.v);
      const double tol = dt == DType::f64 ? 1e-14 : 1e-6;
      for (int i = 0; i < 17; ++i) {
        CHECK(yf.at(i) == doctest::Approx(k.y0).epsilon(tol));
        CHECK(yr.at(i) == doctest::Approx(k.y0).epsilon(tol));
      }
    }
  }
}

TEST_CASE("elementwise: non-float dtypes are rejected with graft::Error") {
  Buf a({4}, DType::i64), o({4}, DType::i64);
  CHECK_THROWS_AS(fast::unary(UnaryOp::exp, 0, a.v, o.v), Error);
  CHECK_THROWS_AS(fast::binary(BinaryOp::add, a.v, a.v, o.v), Error);
  CHECK_THROWS_AS(ref::unary(UnaryOp::exp, 0, a.v, o.v), Error);
}

}  // namespace
}  // namespace graft::testing
