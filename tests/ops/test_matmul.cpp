// Fast matmul/linear kernels (oneDNN f32, own f64 kernel) against the reference triple loops.
#include <cmath>
#include <string>

#include "tests/ops/kernel_test_util.h"

using namespace graft;
using graft::testing::Buf;
using graft::testing::check_close;

namespace {

// f32 sums of K products carry ~K * eps of error; the reference rounds once from double.
double atol_for(DType dt, int64_t K) {
  return dt == DType::f32 ? 2e-6 * double(std::max<int64_t>(K, 8)) : 1e-12 * double(K + 1);
}
double rtol_for(DType dt) { return dt == DType::f32 ? 1e-5 : 1e-12; }

// A view of `b`'s memory with another shape and strides.
TensorView view(const Buf& b, Shape shape, Strides strides) {
  TensorView v = b.v;
  v.shape = shape;
  v.strides = strides;
  return v;
}

// Runs fast and reference matmul on the views and compares; out has shape `out_shape`.
void check_matmul(const TensorView& a, const TensorView& b, const Shape& out_shape) {
  const int64_t K = a.shape.back();
  Buf fast(out_shape, a.dtype), want(out_shape, a.dtype);
  fast.rand(100, 101, 7);  // garbage: kernels must write every element
  cpu::matmul(a, b, fast.v, Precision::f32);
  cpu::ref::matmul(a, b, want.v, Precision::f32);
  check_close(fast, want, atol_for(a.dtype, K), rtol_for(a.dtype));
}

void check_plain(DType dt, int64_t M, int64_t K, int64_t N) {
  Buf a({M, K}, dt), b({K, N}, dt);
  a.rand(-1, 1, 1);
  b.rand(-1, 1, 2);
  check_matmul(a.v, b.v, {M, N});
}

const DType kFloatTypes[] = {DType::f32, DType::f64};

}  // namespace

TEST_CASE("matmul: plain 2-d shapes") {
  const int64_t shapes[][3] = {{1, 1, 1},  {7, 13, 5},   {65, 127, 33}, {2, 3, 4},
                               {1, 64, 1}, {128, 64, 96}, {17, 1, 40},  {200, 300, 150}};
  for (DType dt : kFloatTypes)
    for (auto& s : shapes) {
      const std::string type(dtype_name(dt));
      CAPTURE(type);
      CAPTURE(s[0]);
      CAPTURE(s[1]);
      CAPTURE(s[2]);
      check_plain(dt, s[0], s[1], s[2]);
    }
}

TEST_CASE("matmul: K == 0 gives zeros, empty outputs are fine") {
  for (DType dt : kFloatTypes) {
    Buf a({4, 0}, dt), b({0, 3}, dt), out({4, 3}, dt);
    out.rand(5, 6);
    cpu::matmul(a.v, b.v, out.v, Precision::f32);
    for (int64_t i = 0; i < out.numel(); ++i) CHECK(out.at(i) == 0.0);
    Buf a0({0, 5}, dt), b0({5, 3}, dt), out0({0, 3}, dt);
    cpu::matmul(a0.v, b0.v, out0.v, Precision::f32);  // nothing to do, must not crash
  }
}

// Tiny products run in graft's own kernel and larger f32 ones in oneDNN: the layout tests
// below run at both scales (`s` multiplies the sizes).
const int64_t kScales[] = {1, 8};

// Runs body(dt, s) for every float type and scale, both named in a failure's message.
template <class F> void for_types_and_scales(F&& body) {
  for (DType dt : kFloatTypes)
    for (int64_t s : kScales) {
      const std::string type(dtype_name(dt));
      CAPTURE(type);
      CAPTURE(s);
      body(dt, s);
    }
}

TEST_CASE("matmul: batched [3,4,5] x [3,5,6]") {
  for_types_and_scales([](DType dt, int64_t s) {
    Buf a({3, 4 * s, 5 * s}, dt), b({3, 5 * s, 6 * s}, dt);
    a.rand(-1, 1, 3);
    b.rand(-1, 1, 4);
    check_matmul(a.v, b.v, {3, 4 * s, 6 * s});
  });
}

TEST_CASE("matmul: broadcast batch [2,1,4,5] x [3,5,6] -> [2,3,4,6]") {
  for_types_and_scales([](DType dt, int64_t s) {
    const int64_t M = 4 * s, K = 5 * s, N = 6 * s;
    Buf a({2, 1, M, K}, dt), b({3, K, N}, dt);
    a.rand(-1, 1, 5);
    b.rand(-1, 1, 6);
    check_matmul(a.v.broadcast_to({2, 3, M, K}), b.v.broadcast_to({2, 3, K, N}), {2, 3, M, N});
    // a matrix times a batch, and a batch times a matrix
    Buf m({M, K}, dt), bb({3, K, N}, dt);
    m.rand(-1, 1, 7);
    bb.rand(-1, 1, 8);
    check_matmul(m.v.broadcast_to({3, M, K}), bb.v, {3, M, N});
    Buf ab({3, M, K}, dt), w({K, N}, dt);
    ab.rand(-1, 1, 9);
    w.rand(-1, 1, 10);
    check_matmul(ab.v, w.v.broadcast_to({3, K, N}), {3, M, N});
    // both operands broadcast along the batch: every output matrix is the same
    check_matmul(m.v.broadcast_to({3, M, K}), w.v.broadcast_to({3, K, N}), {3, M, N});
  });
}

TEST_CASE("matmul: transposed and strided views") {
  for_types_and_scales([](DType dt, int64_t s) {
    const int64_t M = 11 * s + 3, K = 7 * s + 2, N = 5 * s + 1;
    Buf at({K, M}, dt), bt({N, K}, dt), a({M, K}, dt), b({K, N}, dt);
    at.rand(-1, 1, 11);
    bt.rand(-1, 1, 12);
    a.rand(-1, 1, 13);
    b.rand(-1, 1, 14);
    const TensorView a_t = view(at, {M, K}, {1, M});  // a = at^T
    const TensorView b_t = view(bt, {K, N}, {1, K});  // b = bt^T
    check_matmul(a_t, b.v, {M, N});
    check_matmul(a.v, b_t, {M, N});
    check_matmul(a_t, b_t, {M, N});
    // leading dimension larger than the row: a column slice of a wider matrix
    Buf wide({M, K + 3}, dt);
    wide.rand(-1, 1, 15);
    check_matmul(view(wide, {M, K}, {K + 3, 1}), b.v, {M, N});
    // no unit stride at all: every other column (the oneDNN path copies it first)
    Buf twice({M, 2 * K}, dt);
    twice.rand(-1, 1, 16);
    check_matmul(view(twice, {M, K}, {2 * K, 2}), b_t, {M, N});
    // batched transposes: [B, K, M] storage seen as [B, M, K]; batch dim in the middle
    Buf bat({3, K, M}, dt), bm({K, 3, N}, dt);
    bat.rand(-1, 1, 17);
    bm.rand(-1, 1, 18);
    check_matmul(view(bat, {3, M, K}, {K * M, 1, M}), view(bm, {3, K, N}, {N, 3 * N, 1}),
                 {3, M, N});
  });
}

TEST_CASE("matmul: larger and many-batch products (threaded paths)") {
  for (DType dt : kFloatTypes) {
    const std::string type(dtype_name(dt));
    CAPTURE(type);
    Buf a({64, 24, 24}, dt), b({64, 24, 24}, dt);  // many small products
    a.rand(-1, 1, 19);
    b.rand(-1, 1, 20);
    check_matmul(a.v, b.v, {64, 24, 24});
    Buf c({2, 150, 260}, dt), d({2, 260, 70}, dt);  // few large products
    c.rand(-1, 1, 21);
    d.rand(-1, 1, 22);
    check_matmul(c.v, d.v, {2, 150, 70});
  }
}

TEST_CASE("matmul: repeated shapes reuse cached primitives with new data") {
  for (int rep = 0; rep < 3; ++rep) {
    Buf a({90, 110}, DType::f32), b({110, 60}, DType::f32);
    a.rand(-1, 1, 30 + rep);
    b.rand(-1, 1, 40 + rep);
    check_matmul(a.v, b.v, {90, 60});
  }
}

// A strided bias (a view such as column 0 of a [O, 2] tensor): oneDNN refuses it, so graft's
// own kernel adds the bias and must honour its stride.
TEST_CASE("linear: without bias, with a contiguous bias and with a strided bias (stride 2)") {
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {33, 65, 17}, {64, 128, 256}};
  enum class BiasKind { none, contiguous, strided };
  for (DType dt : kFloatTypes)
    for (auto& s : shapes)
      for (BiasKind kind : {BiasKind::none, BiasKind::contiguous, BiasKind::strided}) {
        const int64_t N = s[0], I = s[1], O = s[2];
        const std::string type(dtype_name(dt));
        CAPTURE(type);
        CAPTURE(N);
        CAPTURE(I);
        CAPTURE(O);
        CAPTURE(int(kind));
        Buf x({N, I}, dt), w({O, I}, dt), bias({O, kind == BiasKind::strided ? 2 : 1}, dt);
        x.rand(-1, 1, 50);
        w.rand(-1, 1, 51);
        bias.rand(-1, 1, 52);
        TensorView bv = view(bias, Shape{O}, Strides{bias.v.strides[0]});  // column 0
        if (kind == BiasKind::none) bv.data = nullptr;
        Buf fast({N, O}, dt), want({N, O}, dt);
        fast.rand(100, 101);
        cpu::linear(x.v, w.v, bv, fast.v, Precision::f32);
        cpu::ref::linear(x.v, w.v, bv, want.v, Precision::f32);
        check_close(fast, want, atol_for(dt, I), rtol_for(dt));
      }
}

TEST_CASE("linear: reference agrees with an explicit x @ w^T + b") {
  // Guards the reference itself: 2x2 by hand.
  Buf x({1, 2}, DType::f64), w({2, 2}, DType::f64), b({2}, DType::f64), out({1, 2}, DType::f64);
  double* xp = x.ptr<double>();
  double* wp = w.ptr<double>();
  xp[0] = 1, xp[1] = 2;
  wp[0] = 3, wp[1] = 4, wp[2] = 5, wp[3] = 6;  // w = [[3, 4], [5, 6]]
  b.ptr<double>()[0] = 0.5, b.ptr<double>()[1] = -1;
  cpu::ref::linear(x.v, w.v, b.v, out.v, Precision::f32);
  CHECK(out.at(0) == 11.5);  // 1*3 + 2*4 + 0.5
  CHECK(out.at(1) == 16.0);  // 1*5 + 2*6 - 1
  cpu::linear(x.v, w.v, b.v, out.v, Precision::f32);
  CHECK(out.at(0) == 11.5);
  CHECK(out.at(1) == 16.0);
}

TEST_CASE("matmul/linear bf16: fast kernels (oneDNN and own) agree with the rounding reference") {
  // prec bf16 rounds both f32 operands to bfloat16 and accumulates in f32: the reference does the
  // rounding and an exact sum, so the fast kernels agree to f32 accumulation error, while an f32
  // product of the unrounded operands is off by bf16's 2^-9 relative.
  const bool onednn_before = cpu::use_onednn();
  for (bool onednn : {true, false}) {
    CAPTURE(onednn);
    cpu::set_use_onednn(onednn);
    // a [2, 48, 64] @ b^T (b [40, 64] transposed, broadcast over the batch)
    Buf a({2, 48, 64}, DType::f32), b({40, 64}, DType::f32), bias({40}, DType::f32);
    a.rand(-1, 1, 70);
    b.rand(-1, 1, 71);
    bias.rand(-1, 1, 72);
    TensorView bt = view(b, {64, 40}, {1, 64});
    Buf fast({2, 48, 40}, DType::f32), want({2, 48, 40}, DType::f32), exact({2, 48, 40}, DType::f32);
    fast.rand(100, 101);
    cpu::matmul(a.v, bt.broadcast_to({2, 64, 40}), fast.v, Precision::bf16);
    cpu::ref::matmul(a.v, bt.broadcast_to({2, 64, 40}), want.v, Precision::bf16);
    cpu::ref::matmul(a.v, bt.broadcast_to({2, 64, 40}), exact.v, Precision::f32);
    check_close(fast, want, atol_for(DType::f32, 64), rtol_for(DType::f32));
    double worst = 0;
    for (int64_t i = 0; i < exact.v.numel(); ++i) worst = std::max(worst, std::fabs(exact.at(i) - want.at(i)));
    CHECK(worst > 1e-3);  // the rounding is real
    // linear with a bias (the bias stays f32)
    TensorView x = view(a, {96, 64}, {64, 1});
    Buf lf({96, 40}, DType::f32), lw({96, 40}, DType::f32);
    lf.rand(100, 101);
    cpu::linear(x, b.v, bias.v, lf.v, Precision::bf16);
    cpu::ref::linear(x, b.v, bias.v, lw.v, Precision::bf16);
    check_close(lf, lw, atol_for(DType::f32, 64), rtol_for(DType::f32));
  }
  cpu::set_use_onednn(onednn_before);
  // float64 ignores bf16
  Buf a({8, 8}, DType::f64), b({8, 8}, DType::f64), o1({8, 8}, DType::f64), o2({8, 8}, DType::f64);
  a.rand(-1, 1, 73);
  b.rand(-1, 1, 74);
  cpu::matmul(a.v, b.v, o1.v, Precision::bf16);
  cpu::matmul(a.v, b.v, o2.v, Precision::f32);
  for (int64_t i = 0; i < 64; ++i) CHECK(o1.at(i) == o2.at(i));
}

TEST_CASE("matmul/linear bf16: operands over 2^21 elements run in slices, same results") {
  // oneDNN's bf16 path rounds a (or b) into a buffer slice by slice when it is larger than 2^21
  // elements: slices of out's rows when a is the larger, of its columns when b is (with the
  // bias sliced too); a linear's [n, M, K] input counts as one [n M, K] matrix.
  const bool onednn_before = cpu::use_onednn();
  cpu::set_use_onednn(true);
  const int64_t K = 4096, big = 600, small = 24;  // 600 x 4096 = 2.46M elements: two slices
  auto check_mm = [&](const TensorView& a, const TensorView& b, const Shape& out_shape) {
    Buf fast(out_shape, DType::f32), want(out_shape, DType::f32);
    fast.rand(100, 101, 9);
    cpu::matmul(a, b, fast.v, Precision::bf16);
    cpu::ref::matmul(a, b, want.v, Precision::bf16);
    check_close(fast, want, atol_for(DType::f32, K), rtol_for(DType::f32));
  };
  Buf tall({big, K}, DType::f32), wide({K, big}, DType::f32), thin({K, small}, DType::f32), flat({small, K}, DType::f32);
  tall.rand(-1, 1, 80);
  wide.rand(-1, 1, 81);
  thin.rand(-1, 1, 82);
  flat.rand(-1, 1, 83);
  SUBCASE("a by rows") { check_mm(tall.v, thin.v, {big, small}); }
  SUBCASE("b by columns") { check_mm(flat.v, wide.v, {small, big}); }
  SUBCASE("a column-major (a gradient's transpose) by rows") {
    check_mm(view(wide, {big, K}, {1, big}), thin.v, {big, small});
  }
  SUBCASE("linear: [2, 300, K] input by rows, and a [600, K] weight by columns with its bias") {
    Buf bias_s({small}, DType::f32), bias_b({big}, DType::f32);
    bias_s.rand(-1, 1, 84);
    bias_b.rand(-1, 1, 85);
    TensorView x3 = view(tall, {2, big / 2, K}, {big / 2 * K, K, 1});
    Buf lf({2, big / 2, small}, DType::f32), lw({2, big / 2, small}, DType::f32);
    lf.rand(100, 101, 10);
    cpu::linear(x3, flat.v, bias_s.v, lf.v, Precision::bf16);
    cpu::ref::linear(x3, flat.v, bias_s.v, lw.v, Precision::bf16);
    check_close(lf, lw, atol_for(DType::f32, K), rtol_for(DType::f32));
    Buf wf({small, big}, DType::f32), ww({small, big}, DType::f32);
    wf.rand(100, 101, 11);
    cpu::linear(flat.v, tall.v, bias_b.v, wf.v, Precision::bf16);
    cpu::ref::linear(flat.v, tall.v, bias_b.v, ww.v, Precision::bf16);
    check_close(wf, ww, atol_for(DType::f32, K), rtol_for(DType::f32));
  }
  cpu::set_use_onednn(onednn_before);
}
