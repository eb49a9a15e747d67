// Conv1d and pooling kernels: the fast CPU kernels (oneDNN for float32) against the scalar
// reference kernels on random shapes (stride, padding, dilation, groups, bias, non-contiguous
// inputs), and the reference kernels against a direct hand computation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ops/cpu/cpu_kernels.h"
#include "tests/ops/kernel_test_util.h"

using namespace graft;
using graft::testing::Buf;
using graft::testing::check_close;

namespace {

int64_t out_len(int64_t L, int64_t K, const Conv1dArgs& a) {
  return (L + a.pad_l + a.pad_r - a.dilation * (K - 1) - 1) / a.stride + 1;
}

// A [d0, d1, d2] view into a buffer of [d0, d2, d1] (the last two dims transposed).
TensorView transposed12(const Buf& b) {
  TensorView v = b.v;
  std::swap(v.shape[1], v.shape[2]);
  std::swap(v.strides[1], v.strides[2]);
  return v;
}

// Small random integers: deterministic draws from a seed.
int64_t pick(uint64_t& s, int64_t lo, int64_t hi) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return lo + int64_t((s >> 33) % uint64_t(hi - lo + 1));
}

}  // namespace

TEST_CASE("conv1d reference kernel: a hand-computed example") {
  // x = [1, 2, 3, 4] (one channel), w = [1, -1], stride 1, pad 1 each side, bias 0.5:
  // padded [0, 1, 2, 3, 4, 0] -> windows (0,1) (1,2) (2,3) (3,4) (4,0) -> -1 -1 -1 -1 4, + 0.5
  Buf x({1, 1, 4}, DType::f64), w({1, 1, 2}, DType::f64), b({1}, DType::f64), y({1, 1, 5}, DType::f64);
  for (int i = 0; i < 4; ++i) x.ptr<double>()[i] = i + 1;
  w.ptr<double>()[0] = 1, w.ptr<double>()[1] = -1;
  b.ptr<double>()[0] = 0.5;
  Conv1dArgs a{1, 1, 1, 1, 1};
  cpu::ref::conv1d(x.v, w.v, b.v, a, y.v);
  const double expect[5] = {-0.5, -0.5, -0.5, -0.5, 4.5};
  for (int i = 0; i < 5; ++i) CHECK(y.ptr<double>()[i] == doctest::Approx(expect[i]));
  // backward input with dy = ones: dx[l] = sum of the taps that read l = w0 + w1 = 0
  Buf dy({1, 1, 5}, DType::f64), dx({1, 1, 4}, DType::f64), dw({1, 1, 2}, DType::f64), db({1}, DType::f64);
  for (int i = 0; i < 5; ++i) dy.ptr<double>()[i] = 1;
  cpu::ref::conv1d_backward_input(dy.v, w.v, a, dx.v);
  for (int i = 0; i < 4; ++i) CHECK(dx.ptr<double>()[i] == doctest::Approx(0.0));
  // dw[k] = sum_t x_padded[t + k]: both = 1 + 2 + 3 + 4
  cpu::ref::conv1d_backward_weight(x.v, dy.v, a, dw.v, db.v);
  CHECK(dw.ptr<double>()[0] == doctest::Approx(10.0));
  CHECK(dw.ptr<double>()[1] == doctest::Approx(10.0));
  CHECK(db.ptr<double>()[0] == doctest::Approx(5.0));
}

TEST_CASE("conv1d fast kernels (oneDNN f32, f64) match the reference on random shapes") {
  uint64_t s = 12345;
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t G = pick(s, 1, 3), B = pick(s, 1, 3), cin_g = pick(s, 1, 4),
                  cout_g = pick(s, 1, 4), K = pick(s, 1, 5), L = pick(s, 1, 12);
    Conv1dArgs a;
    a.stride = pick(s, 1, 3), a.dilation = pick(s, 1, 3), a.groups = G;
    a.pad_l = pick(s, 0, 3), a.pad_r = trial % 3 == 0 ? pick(s, 0, 3) : a.pad_l;
    if (L + a.pad_l + a.pad_r < a.dilation * (K - 1) + 1) a.pad_r += a.dilation * (K - 1);
    const int64_t Cin = cin_g * G, Cout = cout_g * G, Lout = out_len(L, K, a);
    const bool with_bias = trial % 2 == 0, strided = trial % 4 == 1;
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(fmt::format("trial {} {} B={} Cin={} Cout={} L={} K={} stride={} pad={}/{} dil={} G={} "
                       "bias={} strided={}", trial, dt, B, Cin, Cout, L, K, a.stride, a.pad_l,
                       a.pad_r, a.dilation, G, with_bias, strided));
      Buf xs(strided ? Shape{B, L, Cin} : Shape{B, Cin, L}, dt);
      xs.rand(-1, 1, 1 + trial);
      const TensorView x = strided ? transposed12(xs) : xs.v;
      Buf w({Cout, cin_g, K}, dt), b({Cout}, dt), dy({B, Cout, Lout}, dt);
      w.rand(-1, 1, 100 + trial), b.rand(-1, 1, 200 + trial), dy.rand(-1, 1, 300 + trial);
      TensorView bias = b.v;
      if (!with_bias) bias.data = nullptr;
      const double tol = dt == DType::f32 ? 1e-5 : 1e-12;

      Buf y({B, Cout, Lout}, dt), y_ref({B, Cout, Lout}, dt);
      cpu::conv1d(x, w.v, bias, a, y.v);
      cpu::ref::conv1d(x, w.v, bias, a, y_ref.v);
      check_close(y, y_ref, tol, tol);

      Buf dx({B, Cin, L}, dt), dx_ref({B, Cin, L}, dt);
      // a non-contiguous dy too, on the strided trials
      Buf dys({B, Lout, Cout}, dt);
      dys.rand(-1, 1, 400 + trial);
      const TensorView dyv = strided ? transposed12(dys) : dy.v;
      cpu::conv1d_backward_input(dyv, w.v, a, dx.v);
      cpu::ref::conv1d_backward_input(dyv, w.v, a, dx_ref.v);
      check_close(dx, dx_ref, tol, tol);

      Buf dw({Cout, cin_g, K}, dt), dw_ref({Cout, cin_g, K}, dt), db({Cout}, dt), db_ref({Cout}, dt);
      TensorView dbv = db.v, dbv_ref = db_ref.v;
      if (!with_bias) dbv.data = dbv_ref.data = nullptr;
      cpu::conv1d_backward_weight(x, dyv, a, dw.v, dbv);
      cpu::ref::conv1d_backward_weight(x, dyv, a, dw_ref.v, dbv_ref);
      check_close(dw, dw_ref, tol, tol);
      if (with_bias) check_close(db, db_ref, tol, tol);
    }
  }
}

TEST_CASE("conv1d fast kernel: a larger problem (multi-threaded oneDNN path)") {
  Conv1dArgs a{1, 2, 2, 1, 1};
  const int64_t B = 8, Cin = 64, Cout = 64, L = 64, K = 5, Lout = out_len(L, K, a);
  Buf x({B, Cin, L}, DType::f32), w({Cout, Cin, K}, DType::f32), b({Cout}, DType::f32);
  x.rand(-1, 1, 1), w.rand(-1, 1, 2), b.rand(-1, 1, 3);
  Buf y({B, Cout, Lout}, DType::f32), y_ref({B, Cout, Lout}, DType::f32);
  cpu::conv1d(x.v, w.v, b.v, a, y.v);
  cpu::ref::conv1d(x.v, w.v, b.v, a, y_ref.v);
  check_close(y, y_ref, 1e-4, 1e-4);
  // twice: the cached primitive gives the same answer
  Buf y2({B, Cout, Lout}, DType::f32);
  cpu::conv1d(x.v, w.v, b.v, a, y2.v);
  check_close(y2, y, 1e-30, 0);
}

TEST_CASE("pool1d fast kernels match the reference; hand-computed max and avg") {
  // hand check: x = [3, 1, 4, 1, 5], k 2, stride 2, pad 1: windows (pad,3) (1,4) (1,5)
  Buf x({1, 1, 5}, DType::f64);
  const double xv[5] = {3, 1, 4, 1, 5};
  std::copy(xv, xv + 5, x.ptr<double>());
  Pool1dArgs a;
  a.kernel = 2, a.stride = 2, a.pad_l = a.pad_r = 1;
  Buf y({1, 1, 3}, DType::f64), idx({1, 1, 3}, DType::i64);
  cpu::ref::pool1d(x.v, a, y.v, idx.v);
  CHECK(y.ptr<double>()[0] == 3);
  CHECK(y.ptr<double>()[1] == 4);
  CHECK(y.ptr<double>()[2] == 5);
  CHECK(idx.ptr<int64_t>()[0] == 0);
  CHECK(idx.ptr<int64_t>()[1] == 2);
  CHECK(idx.ptr<int64_t>()[2] == 4);
  a.kind = PoolKind::avg;
  cpu::ref::pool1d(x.v, a, y.v, idx.v);
  CHECK(y.ptr<double>()[0] == doctest::Approx(1.5));  // (0 + 3) / 2
  a.count_include_pad = false;
  cpu::ref::pool1d(x.v, a, y.v, idx.v);
  CHECK(y.ptr<double>()[0] == doctest::Approx(3.0));  // 3 / 1
  CHECK(y.ptr<double>()[2] == doctest::Approx(3.0));  // (1 + 5) / 2

  uint64_t s = 777;
  for (int trial = 0; trial < 30; ++trial) {
    Pool1dArgs p;
    p.kind = trial % 2 ? PoolKind::max : PoolKind::avg;
    p.kernel = pick(s, 1, 4), p.stride = pick(s, 1, 3);
    p.dilation = p.kind == PoolKind::max ? pick(s, 1, 2) : 1;
    const int64_t span = p.dilation * (p.kernel - 1) + 1;
    p.pad_l = p.pad_r = pick(s, 0, span / 2);
    p.count_include_pad = trial % 3 != 0;
    const int64_t B = pick(s, 1, 3), C = pick(s, 1, 4), L = span + pick(s, 0, 9);
    const int64_t Lout = (L + 2 * p.pad_l - span) / p.stride + 1;
    const bool strided = trial % 4 == 1;
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(fmt::format("trial {} {} kind={} k={} s={} pad={} dil={} L={} strided={}", trial, dt,
                       int(p.kind), p.kernel, p.stride, p.pad_l, p.dilation, L, strided));
      Buf xs(strided ? Shape{B, L, C} : Shape{B, C, L}, dt);
      xs.rand(-1, 1, 50 + trial);
      const TensorView xv2 = strided ? transposed12(xs) : xs.v;
      Buf out({B, C, Lout}, dt), out_ref({B, C, Lout}, dt);
      Buf ind({B, C, Lout}, DType::i64), ind_ref({B, C, Lout}, DType::i64);
      cpu::pool1d(xv2, p, out.v, ind.v);
      cpu::ref::pool1d(xv2, p, out_ref.v, ind_ref.v);
      check_close(out, out_ref, 1e-6, 1e-6);
      if (p.kind == PoolKind::max) check_close(ind, ind_ref, 1e-9, 0);
      Buf dy({B, C, Lout}, dt), dx({B, C, L}, dt), dx_ref({B, C, L}, dt);
      dy.rand(-1, 1, 90 + trial);
      cpu::pool1d_backward(dy.v, ind_ref.v, p, dx.v);
      cpu::ref::pool1d_backward(dy.v, ind_ref.v, p, dx_ref.v);
      check_close(dx, dx_ref, 1e-6, 1e-6);
    }
  }
}
