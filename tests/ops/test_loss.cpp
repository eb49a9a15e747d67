// Cross-entropy kernels: hand-computed values, fast vs reference (ignore_index rows, label
// smoothing 0 and 0.1, strided rows, broadcast dloss), a central finite-difference check of the
// backward in float64, and out-of-range targets.
#include <string>
#include <vector>

#include "tests/ops/kernel_test_util.h"

using namespace graft::testing;  // Buf, check_close, check_error, DType, Shape, TensorView, cpu

namespace {

constexpr int64_t kIgnore = -100;

struct CrossEntropy {
  const char* name;
  decltype(&cpu::cross_entropy) forward;
  decltype(&cpu::cross_entropy_backward) backward;
};
const CrossEntropy kFast{"fast", cpu::cross_entropy, cpu::cross_entropy_backward};
const CrossEntropy kRef{"ref", cpu::ref::cross_entropy, cpu::ref::cross_entropy_backward};

// Targets in [0, V), with every 5th row (starting at row 2) set to `ignore`.
Buf targets(int64_t N, int64_t V, int64_t ignore, uint64_t seed) {
  Buf t = Buf(Shape{N}, DType::i64).rand(0, double(V), seed);
  for (int64_t n = 2; n < N; n += 5) t.ptr<int64_t>()[n] = ignore;
  return t;
}

// sum_n w[n] * loss[n] for logits x (f64), via `ce`.
double weighted_loss(const CrossEntropy& ce, const Buf& x, const Buf& t, double ls,
                     const Buf& w) {
  const int64_t N = x.v.shape[0];
  Buf loss(Shape{N}, DType::f64), logp(x.v.shape, DType::f64);
  ce.forward(x.v, t.v, kIgnore, ls, loss.v, logp.v);
  double s = 0;
  for (int64_t n = 0; n < N; ++n) s += w.at(n) * loss.at(n);
  return s;
}

}  // namespace

TEST_CASE("cross_entropy: hand-computed values") {
  for (const CrossEntropy* ce : {&kFast, &kRef})
    for (DType dt : {DType::f32, DType::f64}) {
      CAPTURE(ce->name);
      const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
      // Row 0: [1, 2, 3] with target 2; row 1: zeros with target 0; row 2: ignored.
      Buf x = buf_of({3, 3}, dt, {1, 2, 3, 0, 0, 0, 5, 6, 7});
      Buf t = buf_of({3}, DType::i64, {2, 0, double(kIgnore)});
      const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
      for (double ls : {0.0, 0.1}) {
        CAPTURE(ls);
        Buf loss(Shape{3}, dt), logp(Shape{3, 3}, dt);
        ce->forward(x.v, t.v, kIgnore, ls, loss.v, logp.v);
        // -(1 - ls) (3 - lse) - ls / 3 * (6 - 3 lse) = lse - 3 + ls
        CHECK(loss.at(0) == doctest::Approx(lse - 3 + ls).epsilon(tol));
        CHECK(loss.at(1) == doctest::Approx(std::log(3.0)).epsilon(tol));  // uniform: log V
        CHECK(loss.at(2) == 0.0);
        for (int v = 0; v < 3; ++v) CHECK(logp.at(v) == doctest::Approx(v + 1 - lse).epsilon(tol));
        // The ignored row still gets its log-softmax.
        CHECK(logp.at(8) == doctest::Approx(7 - (7 + lse - 3)).epsilon(tol));

        // Backward with dloss = 2: row 0 = 2 (softmax - (1 - ls) onehot(2) - ls / 3).
        Buf dl = buf_of({3}, dt, {2, 2, 2}), dx(Shape{3, 3}, dt);
        ce->backward(logp.v, t.v, kIgnore, ls, dl.v, dx.v);
        for (int v = 0; v < 3; ++v) {
          const double p = std::exp(v + 1 - lse);
          CHECK(dx.at(v) == doctest::Approx(2 * (p - (v == 2 ? 1 - ls : 0) - ls / 3)).epsilon(tol));
          CHECK(dx.at(6 + v) == 0.0);
        }
      }
    }
}

TEST_CASE("cross_entropy: large logits stay finite") {
  for (const CrossEntropy* ce : {&kFast, &kRef}) {
    Buf x = buf_of({2, 3}, DType::f32, {1000, -1000, 0, 80, 90, 100});
    Buf t = buf_of({2}, DType::i64, {1, 2});
    Buf loss(Shape{2}, DType::f32), logp(Shape{2, 3}, DType::f32);
    ce->forward(x.v, t.v, kIgnore, 0.0, loss.v, logp.v);
    CHECK(loss.at(0) == doctest::Approx(2000).epsilon(1e-6));
    const double lse1 = std::log(1 + std::exp(-10.0) + std::exp(-20.0));
    CHECK(loss.at(1) == doctest::Approx(lse1).epsilon(1e-5));
    for (int64_t i = 0; i < 6; ++i) CHECK(std::isfinite(logp.at(i)));
  }
}

TEST_CASE("cross_entropy: fast == reference") {
  struct Case {
    int64_t N, V;
  };
  // Tails shorter than a SIMD vector, and sizes above the parallel grain.
  const Case cases[] = {{1, 1}, {4, 7}, {5, 16}, {3, 17}, {33, 1000}, {300, 127}, {64, 5003}};
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases)
      for (double ls : {0.0, 0.1})
        for (int64_t ignore : {kIgnore, int64_t(0)}) {
          CAPTURE(dt);
          CAPTURE(c.N);
          CAPTURE(c.V);
          CAPTURE(ls);
          CAPTURE(ignore);
          const double tol = dt == DType::f32 ? 2e-5 : 1e-12;
          Buf x = Buf(Shape{c.N, c.V}, dt).rand(-8, 8, 1);
          Buf t = targets(c.N, c.V, ignore, 2);
          Buf loss_f(Shape{c.N}, dt), loss_r(Shape{c.N}, dt);
          Buf logp_f(Shape{c.N, c.V}, dt), logp_r(Shape{c.N, c.V}, dt);
          cpu::cross_entropy(x.v, t.v, ignore, ls, loss_f.v, logp_f.v);
          cpu::ref::cross_entropy(x.v, t.v, ignore, ls, loss_r.v, logp_r.v);
          check_close(loss_f, loss_r, tol, tol);
          check_close(logp_f, logp_r, tol, tol);
          for (int64_t n = 0; n < c.N; ++n)
            if (t.ptr<int64_t>()[n] == ignore) CHECK(loss_f.at(n) == 0.0);

          // Backward from the reference logp, per-row dloss and a broadcast (stride 0) dloss.
          Buf dl = Buf(Shape{c.N}, dt).rand(-1, 1, 3);
          Buf one = Buf(Shape{1}, dt).rand(0.5, 1, 4);
          TensorView bcast = one.v;
          bcast.shape = Shape{c.N};
          bcast.strides = graft::Strides{0};
          for (const TensorView& dloss : {dl.v, bcast}) {
            Buf dx_f(Shape{c.N, c.V}, dt), dx_r(Shape{c.N, c.V}, dt);
            cpu::cross_entropy_backward(logp_r.v, t.v, ignore, ls, dloss, dx_f.v);
            cpu::ref::cross_entropy_backward(logp_r.v, t.v, ignore, ls, dloss, dx_r.v);
            check_close(dx_f, dx_r, tol, tol);
            // Rows of the gradient sum to 0 (softmax and the smoothed target both sum to 1);
            // ignored rows are exactly 0.
            for (int64_t n = 0; n < c.N; ++n) {
              double s = 0, a = 0;
              for (int64_t v = 0; v < c.V; ++v) {
                s += dx_f.at(n * c.V + v);
                a += std::abs(dx_f.at(n * c.V + v));
              }
              CHECK(std::abs(s) <= 1e-4);
              if (t.ptr<int64_t>()[n] == ignore) CHECK(a == 0.0);
            }
          }
        }
}

TEST_CASE("cross_entropy: strided rows") {
  // logits [N, V] inside a [N, V + 5] buffer (unit last stride, fast path) and with a stride of
  // 2 along V (reference path); loss / dlogits views strided too.
  const int64_t N = 9, V = 21;
  for (int64_t vstride : {1, 2}) {
    CAPTURE(vstride);
    Buf mem = Buf(Shape{N, 2 * V + 5}, DType::f32).rand(-4, 4, 5);
    TensorView x = mem.v;
    x.shape = Shape{N, V};
    x.strides = graft::Strides{2 * V + 5, vstride};
    Buf xc(Shape{N, V}, DType::f32);  // the same values, contiguous
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < V; ++v)
        xc.ptr<float>()[n * V + v] = mem.ptr<float>()[n * (2 * V + 5) + v * vstride];
    Buf t = targets(N, V, kIgnore, 6);
    Buf loss2(Shape{2 * N}, DType::f32), logp(Shape{N, V}, DType::f32);
    TensorView loss = loss2.v;
    loss.shape = Shape{N};
    loss.strides = graft::Strides{2};
    Buf loss_r(Shape{N}, DType::f32), logp_r(Shape{N, V}, DType::f32);
    cpu::cross_entropy(x, t.v, kIgnore, 0.1, loss, logp.v);
    cpu::ref::cross_entropy(xc.v, t.v, kIgnore, 0.1, loss_r.v, logp_r.v);
    for (int64_t n = 0; n < N; ++n)
      CHECK(loss2.at(2 * n) == doctest::Approx(loss_r.at(n)).epsilon(1e-5));
    check_close(logp, logp_r, 1e-5, 1e-5);

    Buf dl = Buf(Shape{N}, DType::f32).rand(-1, 1, 7);
    Buf dmem(Shape{N, 2 * V}, DType::f32), dx_r(Shape{N, V}, DType::f32);
    TensorView dx = dmem.v;
    dx.shape = Shape{N, V};
    dx.strides = graft::Strides{2 * V, vstride};
    cpu::cross_entropy_backward(logp_r.v, t.v, kIgnore, 0.1, dl.v, dx);
    cpu::ref::cross_entropy_backward(logp_r.v, t.v, kIgnore, 0.1, dl.v, dx_r.v);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < V; ++v)
        CHECK(dmem.at(n * 2 * V + v * vstride) ==
              doctest::Approx(dx_r.at(n * V + v)).epsilon(1e-5).scale(1));
  }
}

TEST_CASE("cross_entropy_backward matches central finite differences (float64)") {
  const int64_t N = 6, V = 7;
  const double h = 1e-6;
  for (const CrossEntropy* ce : {&kFast, &kRef})
    for (double ls : {0.0, 0.1}) {
      CAPTURE(ce->name);
      CAPTURE(ls);
      Buf x = Buf(Shape{N, V}, DType::f64).rand(-3, 3, 8);
      Buf t = targets(N, V, kIgnore, 9);  // row 2 ignored
      Buf w = Buf(Shape{N}, DType::f64).rand(-1, 1, 10);
      // Analytic: dL/dx for L = sum_n w[n] loss[n] is the backward with dloss = w.
      Buf loss(Shape{N}, DType::f64), logp(Shape{N, V}, DType::f64), dx(Shape{N, V}, DType::f64);
      ce->forward(x.v, t.v, kIgnore, ls, loss.v, logp.v);
      ce->backward(logp.v, t.v, kIgnore, ls, w.v, dx.v);
      for (int64_t i = 0; i < N * V; ++i) {
        CAPTURE(i);
        double& xi = x.ptr<double>()[i];
        const double keep = xi;
        xi = keep + h;
        const double up = weighted_loss(*ce, x, t, ls, w);
        xi = keep - h;
        const double down = weighted_loss(*ce, x, t, ls, w);
        xi = keep;
        CHECK(dx.at(i) == doctest::Approx((up - down) / (2 * h)).epsilon(1e-6).scale(1));
      }
    }
}

TEST_CASE("cross_entropy: out-of-range target throws graft::Error") {
  const int64_t N = 4, V = 7;
  for (const CrossEntropy* ce : {&kFast, &kRef})
    for (int64_t bad : {V, int64_t(-1), int64_t(1000)}) {
      CAPTURE(ce->name);
      CAPTURE(bad);
      Buf x = Buf(Shape{N, V}, DType::f32).rand(-1, 1, 11);
      Buf t = buf_of({N}, DType::i64, {0, 6, double(bad), 3});
      Buf loss(Shape{N}, DType::f32), logp(Shape{N, V}, DType::f32), dx(Shape{N, V}, DType::f32);
      Buf dl = Buf(Shape{N}, DType::f32).rand(0, 1, 12);
      const std::vector<std::string> parts = {"cross_entropy", std::to_string(bad), "row 2", "7"};
      check_error([&] { ce->forward(x.v, t.v, kIgnore, 0.0, loss.v, logp.v); }, parts);
      check_error([&] { ce->backward(logp.v, t.v, kIgnore, 0.0, dl.v, dx.v); }, parts);
    }
}
