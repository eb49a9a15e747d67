// The tape engine: DAGs, views, accumulation, retain_graph, NoGradGuard, detach, double
// backward, grad(), saved-tensor version checks.
#include <doctest/doctest.h>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"

using namespace graft;

static Tensor leaf(std::initializer_list<double> v) {
  return tensor(v, TensorOptions(DType::f64).requires_grad());
}
static std::vector<double> vec(const Tensor& t) { return t.to_vector<double>(); }

TEST_CASE("backward on a DAG with a shared subexpression") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor s = x * x;         // shared
  Tensor y = sum(s + s * x);  // y = sum(x^2 + x^3) -> dy/dx = 2x + 3x^2
  y.backward();
  auto g = vec(x.grad());
  CHECK(g[0] == doctest::Approx(5.0));
  CHECK(g[1] == doctest::Approx(16.0));
  CHECK(g[2] == doctest::Approx(33.0));
}

TEST_CASE("gradients accumulate across backward calls and reset with zero_") {
  Tensor x = leaf({1.0, -2.0});
  sum(x * 3.0).backward();
  sum(x * 3.0).backward();
  CHECK(vec(x.grad()) == std::vector<double>{6.0, 6.0});
  x.grad().zero_();
  sum(x).backward();
  CHECK(vec(x.grad()) == std::vector<double>{1.0, 1.0});
}

TEST_CASE("backward twice needs retain_graph") {
  Tensor x = leaf({0.5, 1.5});
  Tensor y = sum(tanh(x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();  // allowed: the graph was retained
  Tensor z = sum(exp(x));
  z.backward();
  CHECK_THROWS_AS(z.backward(), Error);
  try {
    z.backward();
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("retain_graph") != std::string::npos);
  }
}

TEST_CASE("gradients flow through views") {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, TensorOptions(DType::f64).requires_grad());
  Tensor m = x.view({2, 3});
  Tensor y = sum(m.t().slice(0, 1, 3) * 2.0) + sum(m.select(0, 0).unsqueeze(0).expand({4, 3}));
  y.backward();
  // t().slice rows 1..2 of [3,2] = columns 1,2 of m; select row 0 expanded 4 times
  CHECK(vec(x.grad()) == std::vector<double>{4, 6, 6, 0, 2, 2});
}

TEST_CASE("explicit gradient for non-scalar outputs; error without it") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;
  CHECK_THROWS_AS(y.backward(), Error);
  y.backward(tensor({1.0, 10.0}, DType::f64));
  CHECK(vec(x.grad()) == std::vector<double>{2.0, 20.0});
  Tensor z = x * 1.0;
  CHECK_THROWS_AS(z.backward(tensor({1.0}, DType::f64)), Error);  // wrong shape
}

TEST_CASE("NoGradGuard and detach stop recording") {
  Tensor x = leaf({1.0});
  {
    NoGradGuard ng;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
  }
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK_FALSE((d * 3.0).requires_grad());
  CHECK_THROWS_AS((d * 3.0).backward(), Error);
}

TEST_CASE("double backward: d2/dx2 of x^3 and of tanh") {
  Tensor x = leaf({0.5, -1.0});
  Tensor y = sum(pow(x, 3.0));
  auto g = grad({y}, {x}, {}, true, /*create_graph=*/true);  // 3x^2
  auto gg = grad({sum(g[0])}, {x});                          // 6x
  CHECK(vec(gg[0])[0] == doctest::Approx(3.0));
  CHECK(vec(gg[0])[1] == doctest::Approx(-6.0));
  Tensor z = sum(tanh(x));
  z.backward({}, false, /*create_graph=*/true);
  Tensor dz = x.grad();  // 1 - tanh^2
  CHECK(dz.requires_grad());
  auto h = grad({sum(dz)}, {x});  // -2 tanh (1 - tanh^2)
  double t = std::tanh(0.5);
  CHECK(vec(h[0])[0] == doctest::Approx(-2 * t * (1 - t * t)));
}

TEST_CASE("modifying a saved tensor in place is caught at backward") {
  Tensor x = leaf({1.0, 2.0});
  Tensor a = x * 1.0;
  Tensor y = sum(exp(a));  // exp saves its output
  Tensor e = exp(a);
  Tensor w = sum(e * 2.0);
  {
    NoGradGuard ng;
    a.add_(ones({2}, DType::f64));  // exp saved `a`
  }
  CHECK_THROWS_AS(y.backward(), Error);
  (void)w;
}

TEST_CASE("in-place on a tensor requiring grad needs NoGradGuard") {
  Tensor x = leaf({1.0});
  CHECK_THROWS_AS(x.add_(ones({1}, DType::f64)), Error);
  NoGradGuard ng;
  x.add_(ones({1}, DType::f64));
  CHECK(vec(x)[0] == 2.0);
}

TEST_CASE("grad() does not touch .grad and reports unused inputs") {
  Tensor x = leaf({1.0}), u = leaf({2.0});
  Tensor y = sum(x * x);
  CHECK_THROWS_AS(grad({y}, {x, u}, {}, true), Error);
  auto g = grad({y}, {x, u}, {}, false, false, /*allow_unused=*/true);
  CHECK(vec(g[0])[0] == 2.0);
  CHECK_FALSE(g[1].defined());
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("gradcheck catches a wrong gradient") {
  // a "function" whose backward is deliberately wrong: y = x * 2 computed as x*2 but graph says x*3
  Tensor x = uniform({3}, -1, 1, TensorOptions(DType::f64).requires_grad());
  TensorFn wrong = [](const std::vector<Tensor>& in) {
    Tensor a = in[0] * 3.0;  // gradient 3
    Tensor c;
    {
      NoGradGuard ng;
      c = in[0] * -1.0;  // value correction outside the graph: value 2x, gradient 3
    }
    return a + c;
  };
  CHECK_FALSE(gradcheck(wrong, {x}).ok);
  TensorFn right = [](const std::vector<Tensor>& in) { return in[0] * 2.0; };
  CHECK(gradcheck(right, {x}).ok);
}
