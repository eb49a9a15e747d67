// Fast softmax / log_softmax / layer norm kernels (forward and backward) against the reference.
#include <cmath>
#include <string>

#include "tests/ops/kernel_test_util.h"

using namespace graft;
using graft::testing::Buf;
using graft::testing::check_close;

namespace {

const DType kFloatTypes[] = {DType::f32, DType::f64};
// Row lengths: a single element, a ragged tail only, exact vectors, many vectors plus a tail.
const int64_t kRowLengths[] = {1, 7, 64, 1000};
// Row counts: below and above the threshold where rows are spread over threads.
const int64_t kRowCounts[] = {5, 64};

double atol_for(DType dt) { return dt == DType::f32 ? 2e-5 : 1e-12; }
double rtol_for(DType dt) { return dt == DType::f32 ? 2e-5 : 1e-11; }

TensorView absent(DType dt) {
  TensorView v;
  v.dtype = dt;
  return v;  // data == nullptr: "no gamma / beta" or "dgamma not wanted"
}

}  // namespace

TEST_CASE("softmax / log_softmax forward and backward") {
  for (DType dt : kFloatTypes)
    for (int64_t n : kRowCounts)
      for (int64_t c : kRowLengths)
        for (bool log : {false, true}) {
          const std::string type(dtype_name(dt));
          CAPTURE(type);
          CAPTURE(n);
          CAPTURE(c);
          CAPTURE(log);
          // [2, n/2-ish, c]: leading dims fold into rows
          const Shape shape = n % 2 == 0 ? Shape{2, n / 2, c} : Shape{n, c};
          Buf x(shape, dt), dy(shape, dt);
          x.rand(-8, 8, 1);
          dy.rand(-1, 1, 2);
          Buf y(shape, dt), y_ref(shape, dt);
          cpu::softmax(x.v, y.v, log);
          cpu::ref::softmax(x.v, y_ref.v, log);
          check_close(y, y_ref, atol_for(dt), rtol_for(dt));

          Buf dx(shape, dt), dx_ref(shape, dt);
          cpu::softmax_backward(y_ref.v, dy.v, dx.v, log);
          cpu::ref::softmax_backward(y_ref.v, dy.v, dx_ref.v, log);
          check_close(dx, dx_ref, atol_for(dt), rtol_for(dt));
        }
}

TEST_CASE("softmax: large inputs do not overflow, rows sum to one") {
  for (DType dt : kFloatTypes) {
    Buf x({3, 37}, dt), y({3, 37}, dt);
    x.rand(500, 1000, 3);  // exp(1000) overflows both float and double without the max shift
    cpu::softmax(x.v, y.v, false);
    for (int64_t i = 0; i < 3; ++i) {
      double s = 0;
      for (int64_t j = 0; j < 37; ++j) s += y.at(i * 37 + j);
      CHECK(std::abs(s - 1.0) < 1e-5);
    }
    Buf ly({3, 37}, dt), ly_ref({3, 37}, dt);
    cpu::softmax(x.v, ly.v, true);
    cpu::ref::softmax(x.v, ly_ref.v, true);
    check_close(ly, ly_ref, 1e-4, 1e-6);
  }
}

TEST_CASE("layer_norm forward and backward, with and without gamma/beta") {
  for (DType dt : kFloatTypes)
    for (int64_t n : kRowCounts)
      for (int64_t c : kRowLengths)
        for (int affine = 0; affine < 4; ++affine) {
          const bool has_gamma = affine & 1, has_beta = affine & 2;
          const std::string type(dtype_name(dt));
          CAPTURE(type);
          CAPTURE(n);
          CAPTURE(c);
          CAPTURE(has_gamma);
          CAPTURE(has_beta);
          const double eps = 1e-5;
          Buf x({n, c}, dt), dy({n, c}, dt), gamma({c}, dt), beta({c}, dt);
          x.rand(-2, 3, 4);
          dy.rand(-1, 1, 5);
          gamma.rand(0.5, 1.5, 6);
          beta.rand(-1, 1, 7);
          const TensorView g = has_gamma ? gamma.v : absent(dt);
          const TensorView b = has_beta ? beta.v : absent(dt);

          Buf y({n, c}, dt), mean({n}, dt), rstd({n}, dt);
          Buf y_ref({n, c}, dt), mean_ref({n}, dt), rstd_ref({n}, dt);
          cpu::layer_norm(x.v, g, b, eps, y.v, mean.v, rstd.v);
          cpu::ref::layer_norm(x.v, g, b, eps, y_ref.v, mean_ref.v, rstd_ref.v);
          check_close(y, y_ref, atol_for(dt), rtol_for(dt));
          check_close(mean, mean_ref, atol_for(dt), rtol_for(dt));
          check_close(rstd, rstd_ref, atol_for(dt), rtol_for(dt));

          // backward from the reference's saved statistics; dgamma/dbeta wanted or not
          for (bool want_params : {true, false}) {
            CAPTURE(want_params);
            Buf dx({n, c}, dt), dg({c}, dt), db({c}, dt);
            Buf dx_ref({n, c}, dt), dg_ref({c}, dt), db_ref({c}, dt);
            dg.rand(100, 101);  // garbage: the kernel must write, not accumulate
            db.rand(100, 101);
            const TensorView dgv = want_params ? dg.v : absent(dt);
            const TensorView dbv = want_params ? db.v : absent(dt);
            cpu::layer_norm_backward(x.v, g, mean_ref.v, rstd_ref.v, dy.v, dx.v, dgv, dbv);
            cpu::ref::layer_norm_backward(x.v, g, mean_ref.v, rstd_ref.v, dy.v, dx_ref.v,
                                          dg_ref.v, db_ref.v);
            // dx of a row of length 1 is 0 up to rounding of rstd(~316) * (a - a)
            check_close(dx, dx_ref, 4 * atol_for(dt), 4 * rtol_for(dt));
            if (want_params) {
              // column sums over n rows
              check_close(dg, dg_ref, atol_for(dt) * double(n), rtol_for(dt));
              check_close(db, db_ref, atol_for(dt) * double(n), rtol_for(dt));
            }
          }
        }
}

TEST_CASE("layer_norm reference: a row by hand") {
  // x = [1, 2, 3]: mean 2, biased var 2/3, y = (x - 2) / sqrt(2/3 + eps)
  Buf x({1, 3}, DType::f64), y({1, 3}, DType::f64), mean({1}, DType::f64), rstd({1}, DType::f64);
  for (int j = 0; j < 3; ++j) x.ptr<double>()[j] = j + 1;
  const double eps = 1e-5, r = 1.0 / std::sqrt(2.0 / 3.0 + eps);
  for (bool fast : {false, true}) {
    if (fast) cpu::layer_norm(x.v, absent(DType::f64), absent(DType::f64), eps, y.v, mean.v, rstd.v);
    else cpu::ref::layer_norm(x.v, absent(DType::f64), absent(DType::f64), eps, y.v, mean.v, rstd.v);
    CHECK(mean.at(0) == doctest::Approx(2.0).epsilon(1e-14));
    CHECK(rstd.at(0) == doctest::Approx(r).epsilon(1e-14));
    CHECK(y.at(0) == doctest::Approx(-r).epsilon(1e-14));
    CHECK(y.at(2) == doctest::Approx(r).epsilon(1e-14));
  }
}
