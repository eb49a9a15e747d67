// Fast reduce (graft::cpu::reduce) against the reference (graft::cpu::ref::reduce): sum, max
// and min, float32 and float64, every subset of reduced dims of several shapes, contiguous and
// strided inputs; plus the accuracy of float32 sums over 16M elements.
#include <cmath>
#include <vector>

#include "tests/ops/kernel_test_util.h"

namespace graft::testing {
namespace {

namespace fast = ::graft::cpu;
namespace ref = ::graft::cpu::ref;

// check_close tolerance for "must be equal" (atol 0 would divide 0 by 0 on equal values).
constexpr double kExact = 1e-300;

constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};
std::string op_name(ReduceOp op) {
  return op == ReduceOp::sum ? "sum" : op == ReduceOp::max ? "max" : "min";
}

// Layouts of the input: contiguous; all dims reversed in memory (transposed); every other
// element of the last dim (no unit stride anywhere: the generic strided path).
enum class Lay { contig, transposed, step2 };
std::string lay_name(Lay l) {
  return l == Lay::contig ? "contig" : l == Lay::transposed ? "transposed" : "step2";
}

In make_in(Lay lay, const Shape& shape, DType dt, uint64_t seed) {
  In in;
  Shape s = shape;
  if (lay == Lay::contig) {
    in.buf = Buf(shape, dt);
    in.v = in.buf.v;
  } else if (lay == Lay::transposed) {
    in = reversed_layout(shape, dt);
  } else {
    s[s.size() - 1] *= 2;
    in.buf = Buf(s, dt);
    in.v = in.buf.v;
    in.v.shape = shape;
    in.v.strides = contiguous_strides(s);
    in.v.strides[s.size() - 1] = 2;
  }
  in.buf.rand(-1, 1, seed);
  return in;
}

// Shapes chosen to reach every fast path: reduce rows (one output per thread and many threads
// per output), reduce over outer dims (many column blocks, or row-split with few columns),
// sizes below and above kParallelGrain, and non-multiples of the SIMD width.
const std::vector<Shape> kShapes = {{1},        {7},          {100003},   {64, 33},
                                    {5, 7, 9},  {300, 400},   {4, 65536}, {65536, 3},
                                    {40, 3000}, {2, 3, 4, 5}, {3, 70000}, {33, 1, 17}};

TEST_CASE("reduce: matches the reference for every op, dtype, layout and set of dims") {
  for (DType dt : {DType::f32, DType::f64})
    for (const Shape& shape : kShapes)
      for (Lay lay : {Lay::contig, Lay::transposed, Lay::step2}) {
        In x = make_in(lay, shape, dt, 7);
        const int r = shape.size();
        for (int mask = 0; mask < (1 << r); ++mask) {  // every subset of dims
          Shape oshape = shape;
          int64_t n = 1;  // elements per output
          for (int d = 0; d < r; ++d)
            if (mask >> d & 1) n *= shape[d], oshape[d] = 1;
          for (ReduceOp op : kOps) {
            INFO(op_name(op) << " " << std::string(dtype_name(dt)) << " shape=" << shape.str()
                             << " out=" << oshape.str() << " " << lay_name(lay));
            Buf o_fast(oshape, dt), o_ref(oshape, dt);
            fast::reduce(op, x.v, o_fast.v);
            ref::reduce(op, x.v, o_ref.v);
            if (op != ReduceOp::sum) {
              check_close(o_fast, o_ref, kExact, 0);  // max/min are exact
            } else if (dt == DType::f32) {
              // float32 blocks vs double: rounding grows like sqrt(n) for values in [-1, 1)
              check_close(o_fast, o_ref, 1e-5 * std::sqrt(double(n)), 1e-5);
            } else {
              check_close(o_fast, o_ref, 1e-12 * std::sqrt(double(n)), 1e-12);
            }
          }
        }
      }
}

TEST_CASE("reduce: float32 sums of 16M elements stay accurate") {
  // 0.1f is not exact in binary, and a naive float accumulator stalls at 2^21 or so: the
  // exact sum of n copies is n * double(0.1f).
  const int64_t rows = 16384, cols = 1024, n = rows * cols;
  Buf x({rows, cols}, DType::f32);
  std::fill_n(x.ptr<float>(), n, 0.1f);
  const double v = double(0.1f);

  Buf all({1, 1}, DType::f32);
  fast::reduce(ReduceOp::sum, x.v, all.v);
  CHECK(std::abs(all.at(0) / (v * n) - 1) < 1e-6);

  Buf col({1, cols}, DType::f32);  // over the outer dim: rows accumulated per column
  fast::reduce(ReduceOp::sum, x.v, col.v);
  for (int64_t c = 0; c < cols; c += 97) CHECK(std::abs(col.at(c) / (v * rows) - 1) < 1e-6);

  Buf row({rows, 1}, DType::f32);
  fast::reduce(ReduceOp::sum, x.v, row.v);
  CHECK(std::abs(row.at(rows - 1) / (v * cols) - 1) < 1e-6);
}

TEST_CASE("reduce: known values and empty inputs") {
  Buf x({2, 3}, DType::f64);
  double xv[] = {1, -2, 3, 4, 5, -6};
  std::copy(xv, xv + 6, x.ptr<double>());
  Buf s({2, 1}, DType::f64), m({1, 3}, DType::f64), mn({1, 1}, DType::f64);
  fast::reduce(ReduceOp::sum, x.v, s.v);
  CHECK(s.at(0) == 2);
  CHECK(s.at(1) == 3);
  fast::reduce(ReduceOp::max, x.v, m.v);
  CHECK(m.at(0) == 4);
  CHECK(m.at(1) == 5);
  CHECK(m.at(2) == 3);
  fast::reduce(ReduceOp::min, x.v, mn.v);
  CHECK(mn.at(0) == -6);

  Buf e({0, 3}, DType::f32), es({1, 3}, DType::f32);  // sum over an empty dim is 0
  fast::reduce(ReduceOp::sum, e.v, es.v);
  CHECK(es.at(2) == 0);
  ref::reduce(ReduceOp::sum, e.v, es.v);
  CHECK(es.at(2) == 0);
}

}  // namespace
}  // namespace graft::testing
