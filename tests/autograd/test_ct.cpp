// Static expression graphs (graft::ct) and fused tape nodes (graft::fuse): values and
// gradients equal the tape's, derived types simplify constants, printing, errors.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/ct.h"
#include "autograd/fuse.h"
#include "autograd/gradcheck.h"

using namespace graft;

namespace {
ct::Var<0> x;
ct::Var<1> y;

// Value and gradients of a two-input expression through the tape, for comparison.
template <class F> std::array<double, 3> tape_vg(F f, double a, double b) {
  Tensor ta = scalar_tensor(a, TensorOptions(DType::f64).requires_grad());
  Tensor tb = scalar_tensor(b, TensorOptions(DType::f64).requires_grad());
  Tensor v = f(ta, tb);
  auto g = grad({v}, {ta, tb}, {}, false, false, true);
  return {v.item(), g[0].defined() ? g[0].item() : 0.0, g[1].defined() ? g[1].item() : 0.0};
}

void check_rel(double a, double b) {
  CHECK(std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b)));
}

template <class E, class F> void compare(const E& e, F tape_fn, double lo, double hi) {
  Generator g(3);
  auto vals = uniform({2, 20}, lo, hi, DType::f64, &g).to_vector<double>();
  for (int i = 0; i < 20; ++i) {
    double a = vals[i], b = vals[20 + i];
    auto [v, da, db] = ct::value_and_grad(e, a, b);
    auto ref = tape_vg(tape_fn, a, b);
    INFO(ct::to_string(e) << " at " << a << ", " << b);
    check_rel(v, ref[0]);
    check_rel(da, ref[1]);
    check_rel(db, ref[2]);
  }
}
}  // namespace

TEST_CASE("ct: value_and_grad equals the tape for every unary and binary op (float64)") {
  using T = const Tensor&;
  compare(-x * y, [](T a, T b) { return -a * b; }, -2, 2);
  compare(exp(x) + y, [](T a, T b) { return exp(a) + b; }, -2, 2);
  compare(log(x) * y, [](T a, T b) { return log(a) * b; }, 0.2, 3);
  compare(sqrt(x) - y, [](T a, T b) { return sqrt(a) - b; }, 0.2, 3);
  compare(rsqrt(x) * y, [](T a, T b) { return rsqrt(a) * b; }, 0.2, 3);
  compare(abs(x) * y, [](T a, T b) { return abs(a) * b; }, 0.2, 3);
  compare(tanh(x) * y, [](T a, T b) { return tanh(a) * b; }, -2, 2);
  compare(sigmoid(x) * y, [](T a, T b) { return sigmoid(a) * b; }, -2, 2);
  compare(relu(x) * y, [](T a, T b) { return relu(a) * b; }, 0.2, 2);
  compare(gelu(x) * y, [](T a, T b) { return gelu(a) * b; }, -2, 2);
  compare(gelu_tanh(x) * y, [](T a, T b) { return gelu(a, "tanh") * b; }, -2, 2);
  compare(erf(x) * y, [](T a, T b) { return erf(a) * b; }, -2, 2);
  compare(sin(x) * cos(y), [](T a, T b) { return sin(a) * cos(b); }, -3, 3);
  compare(pow(x, 2.5) * y, [](T a, T b) { return pow(a, 2.5) * b; }, 0.2, 2);
  compare(softplus(x) * y, [](T a, T b) { return softplus(a) * b; }, -3, 3);
  compare(softplus(x, 1.0) * y, [](T a, T b) { return softplus(a, 1.0, 1.0) * b; }, -3, 3);
  compare(x / y, [](T a, T b) { return a / b; }, 0.5, 2);
  compare(pow(x, y), [](T a, T b) { return pow(a, b); }, 0.5, 2);
  compare(maximum(x, y * 0.5) + minimum(x, y), [](T a, T b) { return maximum(a, b * 0.5) + minimum(a, b); }, 0.1, 2);
  compare(sin(x) * y + exp(x / y) - 3.0 * x + 2.0, [](T a, T b) { return sin(a) * b + exp(a / b) - a * 3.0 + 2.0; }, 0.5, 2);
}

TEST_CASE("ct: the documented example") {
  auto f = sin(x) * y + exp(x / y);
  auto [v, dx, dy] = ct::value_and_grad(f, 1.5, 2.0);
  check_rel(v, std::sin(1.5) * 2.0 + std::exp(0.75));
  check_rel(dx, std::cos(1.5) * 2.0 + std::exp(0.75) / 2.0);
  check_rel(dy, std::sin(1.5) - std::exp(0.75) * 1.5 / 4.0);
  // float works too, and the symbolic derivative evaluates to the same number
  auto [vf, dxf, dyf] = ct::value_and_grad(f, 1.5f, 2.0f);
  CHECK(dxf == doctest::Approx(dx).epsilon(1e-5));
  check_rel(ct::value(ct::grad(f, x), 1.5, 2.0), dx);
  check_rel(ct::value(ct::grad(f, y), 1.5, 2.0), dy);
  (void)vf, (void)dyf;
}

TEST_CASE("ct: derivative types simplify constants at compile time") {
  auto c = ct::Const{3.0} * 2.0;
  static_assert(std::is_same_v<decltype(ct::grad(c, x)), ct::Zero>, "d(const) is Zero");
  static_assert(std::is_same_v<decltype(ct::grad(x, x)), ct::One>);
  static_assert(std::is_same_v<decltype(ct::grad(y, x)), ct::Zero>);
  // d(x + c)/dx = 1 + 0 -> One ; d(c * y)/dx -> Zero: the constant subtree vanishes
  static_assert(std::is_same_v<decltype(ct::grad(x + 4.0, x)), ct::One>);
  static_assert(std::is_same_v<decltype(ct::grad(c * y, x)), ct::Zero>);
  // d(x * y)/dx = 1 * y + x * 0 -> y
  static_assert(std::is_same_v<decltype(ct::grad(x * y, x)), ct::Var<1>>);
  static_assert(!ct::has_var<decltype(c)>::value);
  CHECK(ct::to_string(ct::grad(x * y, x)) == "y");
}

TEST_CASE("ct: readable printouts of a graph and its derivative") {
  auto f = sin(x) * y + exp(x / y);
  CHECK(ct::to_string(f) == "((sin(x) * y) + exp((x / y)))");
  CHECK(ct::to_string(ct::grad(f, y)) == "(sin(x) + (exp'((x / y)) * d(/)/db(x, y)))");
  CHECK(ct::to_string(pow(x, 2.0)) == "pow(x, 2)");
}

TEST_CASE("fuse: forward and backward equal the tape on tensors with broadcasting") {
  auto expr = tanh(x) * sigmoid(y) + x * y * 0.5;
  auto f = fuse(expr, "gate");
  for (DType dt : {DType::f64, DType::f32}) {
    Generator g(8);
    Tensor a = uniform({33, 70}, -2, 2, TensorOptions(dt).requires_grad(), &g);
    Tensor b = uniform({70}, -2, 2, TensorOptions(dt).requires_grad(), &g);
    Tensor out = f(a, b);
    Tensor ref = tanh(a) * sigmoid(b) + a * b * 0.5;
    double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    CHECK(amax(abs(out - ref)).item() <= tol);
    Tensor w = uniform({33, 70}, -1, 1, dt, &g);
    auto gf = grad({sum(out * w)}, {a, b});
    auto gr = grad({sum(ref * w)}, {a, b});
    CHECK(amax(abs(gf[0] - gr[0])).item() <= tol);
    CHECK(amax(abs(gf[1] - gr[1])).item() <= tol * 50);
  }
}

TEST_CASE("fuse: gradcheck, reductions at the root, errors") {
  auto f = fuse(ct::mean(exp(x) * y - log(x)), "m");
  Tensor a = uniform({4, 5}, 0.5, 2, TensorOptions(DType::f64).requires_grad());
  Tensor b = uniform({4, 5}, -1, 1, TensorOptions(DType::f64).requires_grad());
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {a, b}).ok);
  CHECK(std::abs(f(a, b).item() - mean(exp(a) * b - log(a)).item()) < 1e-12);
  auto g = fuse(x * y, "xy");
  CHECK_THROWS_AS(g(ones({2}), ones({3})), Error);                 // shapes
  CHECK_THROWS_AS(g(ones({2}), ones({2}, DType::f64)), Error);     // dtypes
  Tensor p = ones({2}, TensorOptions().requires_grad());
  Tensor s = sum(g(p, p));
  CHECK_THROWS_AS(grad({s}, {p}, {}, false, /*create_graph=*/true), Error);
}

TEST_CASE("softplus: torch's values, threshold and beta; bad beta is an error") {
  // torch.nn.functional.softplus(x, beta, threshold) = x where beta x > threshold, else
  // log1p(exp(beta x)) / beta
  Tensor t = from_vector(std::vector<double>{-30, -1, 0, 2, 19.5, 21}, {6}, DType::f64);
  const std::vector<double> want = {std::log1p(std::exp(-30.0)), std::log1p(std::exp(-1.0)),
                                    std::log(2.0), std::log1p(std::exp(2.0)),
                                    std::log1p(std::exp(19.5)), 21};
  const std::vector<double> got = softplus(t).to_vector<double>();
  for (int i = 0; i < 6; ++i) check_rel(got[i], want[i]);
  // beta 2, threshold 3: 2 x = 4 > 3 gives x itself
  const std::vector<double> b = softplus(t, 2.0, 3.0).to_vector<double>();
  check_rel(b[1], std::log1p(std::exp(-2.0)) / 2);
  check_rel(b[3], 2.0);
  // the gradient is sigmoid(x) below the threshold, 1 above
  Tensor v = from_vector(std::vector<double>{-30, 0.5, 25}, {3}, DType::f64).requires_grad_(true);
  sum(softplus(v)).backward();
  const std::vector<double> g = v.grad().to_vector<double>();
  check_rel(g[0], 1 / (1 + std::exp(30.0)));
  check_rel(g[1], 1 / (1 + std::exp(-0.5)));
  CHECK(g[2] == 1.0);
  CHECK_THROWS_WITH_AS(softplus(t, 0.0), doctest::Contains("beta must be finite and nonzero"), Error);
  CHECK_THROWS_WITH_AS(softplus(ones({2}, DType::i64)), doctest::Contains("softplus"), Error);
}
