// nn layers, losses and initialisers: forward values against hand-computed examples, gradcheck
// in float64 over inputs AND parameters for every layer and loss, dropout train vs eval,
// Embedding's padding row, dotted parameter names in nested Sequentials, init statistics and
// reproducibility, and graft::Error for bad arguments.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "ops/random.h"
#include "tests/check_values.h"
#include "tests/error_of.h"

using namespace graft;
using namespace graft::test;
namespace init = graft::nn::init;

namespace {

Tensor f64(std::vector<double> v, const Shape& s, bool grad = false) {
  return from_vector(v, s, TensorOptions(DType::f64).requires_grad(grad));
}
Tensor i64(std::vector<int64_t> v, const Shape& s) { return from_vector(v, s); }
// A float64 leaf ~ N(0, 1) from its own seed.
Tensor randn64(const Shape& s, uint64_t seed, bool grad = true) {
  Generator g(seed);
  return randn(s, TensorOptions(DType::f64).requires_grad(grad), &g);
}


// Sets a parameter's values (parameters require grad: write under NoGradGuard).
void set(Tensor& p, std::vector<double> v) {
  NoGradGuard ng;
  p.copy_(from_vector(v, p.shape(), DType::f64));
}


// gradcheck over x and every parameter of m: the parameters are passed as inputs, so gradcheck
// perturbs them in place (same handles as the module's) and checks d out / d param.
GradcheckResult check_module(nn::Module& m, const Tensor& x) {
  std::vector<Tensor> in{x};
  for (const Tensor& p : m.parameters()) in.push_back(p);
  return gradcheck([&m](const std::vector<Tensor>& v) { return m.forward(v[0]); }, in);
}

struct Stats {
  double mean = 0, std = 0, min = 1e300, max = -1e300;
};
Stats stats(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  Stats s;
  for (double x : v) {
    s.mean += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean /= double(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / double(v.size()));
  return s;
}

// max |A - c I| for a square float64 matrix A.
double dist_to_scaled_identity(const Tensor& a, double c) {
  const int64_t n = a.shape()[0];
  std::vector<double> v = a.to_vector<double>();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      worst = std::max(worst, std::abs(v[size_t(i * n + j)] - (i == j ? c : 0.0)));
  return worst;
}

}  // namespace

// ================================================================== init
TEST_CASE("nn init: gains and fans") {
  CHECK(init::calculate_gain(init::Nonlinearity::linear) == 1.0);
  CHECK(init::calculate_gain(init::Nonlinearity::sigmoid) == 1.0);
  CHECK(init::calculate_gain(init::Nonlinearity::tanh) == doctest::Approx(5.0 / 3.0));
  CHECK(init::calculate_gain(init::Nonlinearity::relu) == doctest::Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain(init::Nonlinearity::leaky_relu) ==
        doctest::Approx(std::sqrt(2.0 / (1.0 + 0.01 * 0.01))));
  CHECK(init::calculate_gain(init::Nonlinearity::leaky_relu, std::sqrt(5.0)) ==
        doctest::Approx(std::sqrt(1.0 / 3.0)));
  CHECK(init::calculate_gain(init::Nonlinearity::selu) == 0.75);

  init::Fans f = init::calculate_fan_in_and_fan_out(empty({3, 4}));  // Linear weight [out, in]
  CHECK(f.fan_in == 4);
  CHECK(f.fan_out == 3);
  f = init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 3}));  // conv [out, in, kh, kw]
  CHECK(f.fan_in == 36);
  CHECK(f.fan_out == 72);
  CHECK(contains(error_of([] { init::calculate_fan_in_and_fan_out(empty({5})); }), "at least 2"));
  CHECK_THROWS_AS(init::xavier_uniform_(empty({5})), Error);
  CHECK_THROWS_AS(init::kaiming_normal_(empty({5})), Error);
  CHECK_THROWS_AS(init::orthogonal_(empty({5})), Error);
}

TEST_CASE("nn init: uniform_ and normal_ statistics, seeds and errors") {
  Generator g(1);
  Tensor u = init::uniform_(empty({256, 256}, DType::f64), -2.0, 3.0, &g);
  Stats s = stats(u);
  CHECK(s.min >= -2.0);
  CHECK(s.max < 3.0);
  CHECK(s.mean == doctest::Approx(0.5).epsilon(0.02));
  CHECK(s.std == doctest::Approx(5.0 / std::sqrt(12.0)).epsilon(0.02));

  Tensor n = init::normal_(empty({256, 256}, DType::f64), 1.5, 0.25, &g);
  s = stats(n);
  CHECK(s.mean == doctest::Approx(1.5).epsilon(0.01));
  CHECK(s.std == doctest::Approx(0.25).epsilon(0.02));

  // same seed -> same values; float32 gets the float64 values rounded
  Generator g1(7), g2(7);
  Tensor a = init::normal_(empty({50}, DType::f64), 0, 1, &g1);
  Tensor b = init::normal_(empty({50}), 0, 1, &g2);
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) CHECK(vb[i] == double(float(va[i])));
  // the global generator follows manual_seed
  manual_seed(99);
  std::vector<double> r1 = init::uniform_(empty({20})).to_vector<double>();
  manual_seed(99);
  std::vector<double> r2 = init::uniform_(empty({20})).to_vector<double>();
  CHECK(r1 == r2);

  CHECK(contains(error_of([] { init::normal_(empty({3}), 0, -1); }), "std"));
  CHECK_THROWS_AS(init::uniform_(empty({3}), 2, 1), Error);
  CHECK_THROWS_AS(init::uniform_(empty({3}), 0, INFINITY), Error);
  CHECK(contains(error_of([] { init::uniform_(zeros({3}, DType::i64)); }), "floating"));
}

TEST_CASE("nn init: constant, zeros, ones on parameters and views") {
  Tensor w = randn({3, 4}).requires_grad_();  // a parameter: no NoGradGuard needed by callers
  init::constant_(w, 2.5);
  check_values(w, std::vector<double>(12, 2.5));
  init::zeros_(w.select(0, 1));  // a view writes through
  check_values(w.select(0, 1), {0, 0, 0, 0});
  check_values(w.select(0, 2), {2.5, 2.5, 2.5, 2.5});
  init::ones_(w);
  check_values(w, std::vector<double>(12, 1.0));
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
}

TEST_CASE("nn init: xavier bounds and std") {
  Generator g(3);
  Tensor w = init::xavier_uniform_(empty({64, 128}, DType::f64), 1.0, &g);
  const double bound = std::sqrt(6.0 / (64 + 128));
  Stats s = stats(w);
  CHECK(s.min >= -bound);
  CHECK(s.max <= bound);
  CHECK(s.max > 0.95 * bound);  // the whole range is used
  CHECK(s.min < -0.95 * bound);
  Tensor w2 = init::xavier_uniform_(empty({64, 128}, DType::f64), 2.0, &g);
  CHECK(stats(w2).max <= 2 * bound);
  CHECK(stats(w2).max > 1.9 * bound);

  Tensor n = init::xavier_normal_(empty({256, 512}, DType::f64), 1.0, &g);
  CHECK(stats(n).std == doctest::Approx(std::sqrt(2.0 / (256 + 512))).epsilon(0.03));
}

TEST_CASE("nn init: kaiming normal and uniform") {
  Generator g(4);
  // relu: std = sqrt(2 / fan_in) on a 512x512 matrix, within 5%
  Tensor w = init::kaiming_normal_(empty({512, 512}), 0.0, init::FanMode::fan_in,
                                   init::Nonlinearity::relu, &g);
  Stats s = stats(w);
  CHECK(std::abs(s.std - std::sqrt(2.0 / 512)) < 0.05 * std::sqrt(2.0 / 512));
  CHECK(std::abs(s.mean) < 0.01 * s.std);
  // fan_out mode on a non-square weight [out 128, in 512]
  Tensor wo = init::kaiming_normal_(empty({128, 512}), 0.0, init::FanMode::fan_out,
                                    init::Nonlinearity::relu, &g);
  CHECK(stats(wo).std == doctest::Approx(std::sqrt(2.0 / 128)).epsilon(0.05));
  // uniform: bound = gain sqrt(3 / fan_in); a = sqrt(5) gives 1 / sqrt(fan_in)
  Tensor wu = init::kaiming_uniform_(empty({100, 400}, DType::f64), std::sqrt(5.0),
                                     init::FanMode::fan_in, init::Nonlinearity::leaky_relu, &g);
  s = stats(wu);
  CHECK(s.max <= 1.0 / 20.0);
  CHECK(s.min >= -1.0 / 20.0);
  CHECK(s.max > 0.95 / 20.0);
  Tensor wt = init::kaiming_uniform_(empty({100, 300}, DType::f64), 0.0, init::FanMode::fan_in,
                                     init::Nonlinearity::tanh, &g);
  CHECK(stats(wt).max <= 5.0 / 3.0 * std::sqrt(3.0 / 300));
  CHECK(stats(wt).max > 0.95 * 5.0 / 3.0 * std::sqrt(3.0 / 300));
}

TEST_CASE("nn init: trunc_normal_ stays in [a, b] with the truncated moments") {
  Generator g(5);
  Tensor t = init::trunc_normal_(empty({200000}, DType::f64), 0.0, 1.0, -2.0, 2.0, &g);
  Stats s = stats(t);
  CHECK(s.min >= -2.0);
  CHECK(s.max <= 2.0);
  CHECK(s.max > 1.99);
  CHECK(std::abs(s.mean) < 0.01);
  // Var of N(0,1) truncated to [-2, 2] = 1 - 2 * 2 phi(2) / (Phi(2) - Phi(-2))
  const double phi2 = std::exp(-2.0) / std::sqrt(2 * M_PI), mass = std::erf(2 / std::sqrt(2.0));
  CHECK(s.std == doctest::Approx(std::sqrt(1 - 4 * phi2 / mass)).epsilon(0.01));

  // a tail interval: N(0,1) on [3, 4]; E = (phi(3) - phi(4)) / (Phi(4) - Phi(3))
  Tensor tail = init::trunc_normal_(empty({50000}, DType::f64), 0.0, 1.0, 3.0, 4.0, &g);
  s = stats(tail);
  CHECK(s.min >= 3.0);
  CHECK(s.max <= 4.0);
  auto pdf = [](double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); };
  auto cdf = [](double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); };
  CHECK(s.mean == doctest::Approx((pdf(3) - pdf(4)) / (cdf(4) - cdf(3))).epsilon(0.005));
  // the mirrored (lower) tail
  Tensor low = init::trunc_normal_(empty({50000}, DType::f64), 0.0, 1.0, -4.0, -3.0, &g);
  CHECK(stats(low).mean == doctest::Approx(-(pdf(3) - pdf(4)) / (cdf(4) - cdf(3))).epsilon(0.005));

  // far in the tail (Phi(-9) ~ 1e-19): the inverse CDF works in log space, no rejection loop
  Tensor far = init::trunc_normal_(empty({20000}, DType::f64), 0.0, 1.0, 8.0, 9.0, &g);
  CHECK(stats(far).min >= 8.0);
  CHECK(stats(far).max <= 9.0);
  CHECK(stats(far).mean == doctest::Approx((pdf(8) - pdf(9)) / (cdf(-8) - cdf(-9))).epsilon(0.002));

  // BERT's use: std 0.02, bounds +-2 (absolute) barely truncate
  Tensor bert = init::trunc_normal_(empty({256, 256}), 0.0, 0.02, -2.0, 2.0, &g);
  CHECK(stats(bert).std == doctest::Approx(0.02).epsilon(0.02));
  // shifted mean, bounds in absolute units
  Tensor sh = init::trunc_normal_(empty({10000}, DType::f64), 5.0, 2.0, 4.0, 5.5, &g);
  CHECK(stats(sh).min >= 4.0);
  CHECK(stats(sh).max <= 5.5);

  Generator g1(11), g2(11);
  CHECK(init::trunc_normal_(empty({30}), 0, 1, -2, 2, &g1).to_vector<double>() ==
        init::trunc_normal_(empty({30}), 0, 1, -2, 2, &g2).to_vector<double>());
  CHECK_THROWS_AS(init::trunc_normal_(empty({3}), 0, -1), Error);
  CHECK_THROWS_AS(init::trunc_normal_(empty({3}), 0, 0), Error);
  CHECK_THROWS_AS(init::trunc_normal_(empty({3}), 0, 1, 2, -2), Error);
}

TEST_CASE("nn init: orthogonal_ gives orthonormal rows or columns") {
  struct C {
    Shape shape;
    double gain;
  };
  for (const C& c : {C{{3, 5}, 1.0}, C{{5, 3}, 1.0}, C{{6, 6}, 1.0}, C{{64, 64}, 1.0},
                     C{{4, 2, 3}, 2.0}, C{{40, 7}, 0.5}}) {
    INFO("shape " << c.shape.str() << " gain " << c.gain);
    Generator g(6);
    Tensor w = init::orthogonal_(empty(c.shape, DType::f64), c.gain, &g);
    const int64_t rows = c.shape[0], cols = w.numel() / rows;
    Tensor m = w.reshape({rows, cols});
    Tensor gram = rows <= cols ? matmul(m, m.t()) : matmul(m.t(), m);  // W W^T or W^T W
    CHECK(dist_to_scaled_identity(gram, c.gain * c.gain) < 1e-12);
  }
  // float32 target and a seeded, reproducible draw
  Generator g1(8), g2(8);
  Tensor a = init::orthogonal_(empty({10, 20}), 1.0, &g1);
  Tensor b = init::orthogonal_(empty({10, 20}), 1.0, &g2);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK(dist_to_scaled_identity(matmul(a, a.t()).to(DType::f64), 1.0) < 1e-5);
}

// ================================================================== layers
TEST_CASE("nn layers: Linear forward, init, repr and gradcheck") {
  nn::Linear lin(2, 3);
  CHECK(lin.weight.shape() == Shape{3, 2});
  CHECK(lin.bias.shape() == Shape{3});
  CHECK(lin.repr() == "Linear(in_features=2, out_features=3, bias=true)");
  lin.to(DType::f64);
  set(lin.weight, {1, 2, 3, 4, 5, 6});
  set(lin.bias, {0.5, -1, 2});
  // y = x W^T + b
  Tensor y = lin.forward(f64({1, 1, 2, -1}, {2, 2}));
  check_values(y, {3.5, 6, 13, 0.5, 1, 6});
  CHECK(lin.forward(f64({1, 1}, {2})).shape() == Shape{3});  // 1-D input

  // PyTorch's default init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
  manual_seed(1);
  nn::Linear big(400, 300);
  Stats sw = stats(big.weight), sb = stats(big.bias);
  CHECK(sw.max <= 0.05);
  CHECK(sw.min >= -0.05);
  CHECK(sw.max > 0.049);
  CHECK(sb.max <= 0.05);
  CHECK(sb.min >= -0.05);

  nn::Linear nb(4, 2, false);
  CHECK(!nb.bias.defined());
  CHECK(nb.named_parameters().size() == 1);
  CHECK(nb.repr() == "Linear(in_features=4, out_features=2, bias=false)");

  nn::Linear g(3, 4);
  g.to(DType::f64);
  auto r = check_module(g, randn64({2, 5, 3}, 10));
  CHECK_MESSAGE(r.ok, r.message);
  nn::Linear gnb(3, 2, false);
  gnb.to(DType::f64);
  r = check_module(gnb, randn64({4, 3}, 11));
  CHECK_MESSAGE(r.ok, r.message);

  CHECK(contains(error_of([&] { lin.forward(f64({1, 2, 3}, {1, 3})); }), "size 2"));
  CHECK_THROWS_AS(nn::Linear(0, 3), Error);
  CHECK_THROWS_AS(nn::Linear(3, -1), Error);
}

TEST_CASE("nn layers: Embedding lookup, padding_idx and gradcheck") {
  manual_seed(2);
  nn::Embedding emb(5, 3, 0);
  CHECK(emb.repr() == "Embedding(5, 3, padding_idx=0)");
  check_values(emb.weight.select(0, 0), {0, 0, 0});  // the padding row starts at zero
  CHECK(stats(emb.weight.select(0, 1)).std > 0);
  emb.to(DType::f64);
  Tensor w = emb.weight.detach().clone();
  Tensor y = emb.forward(i64({1, 0, 4, 1}, {2, 2}));
  CHECK(y.shape() == Shape{2, 2, 3});
  check_values(y.select(0, 0).select(0, 0), w.select(0, 1).to_vector<double>());
  check_values(y.select(0, 0).select(0, 1), {0, 0, 0});
  check_values(y.select(0, 1).select(0, 0), w.select(0, 4).to_vector<double>());

  // the padding row gets no gradient; other rows accumulate
  emb.zero_grad();
  sum(emb.forward(i64({0, 2, 2}, {3}))).backward();
  check_values(emb.weight.grad().select(0, 0), {0, 0, 0});
  check_values(emb.weight.grad().select(0, 2), {2, 2, 2});

  // (the padding row is left out: its gradient is zero by design, not by the math)
  auto r = check_module(emb, i64({3, 4, 1, 3, 2}, {5}));
  CHECK_MESSAGE(r.ok, r.message);

  nn::Embedding neg(6, 2, -1);  // counts from the end
  REQUIRE(neg.padding_idx.has_value());
  CHECK(*neg.padding_idx == 5);
  check_values(neg.weight.select(0, 5), {0, 0});
  nn::Embedding plain(4, 2);
  CHECK(plain.repr() == "Embedding(4, 2)");
  CHECK(stats(nn::Embedding(100, 100).weight).std == doctest::Approx(1.0).epsilon(0.03));

  CHECK(contains(error_of([&] { plain.forward(f64({1}, {1})); }), "int64"));
  CHECK_THROWS_AS(plain.forward(i64({4}, {1})), Error);  // out of range
  CHECK_THROWS_AS(nn::Embedding(0, 3), Error);
  CHECK_THROWS_AS(nn::Embedding(3, 0), Error);
  CHECK_THROWS_AS(nn::Embedding(3, 2, 3), Error);
  CHECK_THROWS_AS(nn::Embedding(3, 2, -4), Error);
}

TEST_CASE("nn layers: Dropout train vs eval") {
  nn::Dropout drop(0.25);
  CHECK(drop.repr() == "Dropout(p=0.25)");
  CHECK(drop.is_training());
  manual_seed(3);
  Tensor x = ones({100000}, DType::f64);
  std::vector<double> y = drop.forward(x).to_vector<double>();
  int64_t zeros_n = 0, bad = 0;
  for (double v : y) {
    if (v == 0.0)
      ++zeros_n;
    else if (std::abs(v - 1.0 / 0.75) > 1e-15)
      ++bad;  // kept values are scaled by 1/(1-p)
  }
  CHECK(bad == 0);
  CHECK(double(zeros_n) / 100000 == doctest::Approx(0.25).epsilon(0.03));

  drop.eval();
  Tensor xe = randn64({4, 5}, 12, false);
  CHECK(drop.forward(xe).to_vector<double>() == xe.to_vector<double>());
  drop.train();
  CHECK(drop.forward(xe).to_vector<double>() != xe.to_vector<double>());

  // gradcheck in train mode: the same mask on every call (re-seeded)
  auto r = gradcheck(
      [&](const std::vector<Tensor>& v) {
        manual_seed(21);
        return drop.forward(v[0]);
      },
      {randn64({3, 4}, 13)});
  CHECK_MESSAGE(r.ok, r.message);
  drop.eval();
  r = check_module(drop, randn64({3, 4}, 14));
  CHECK_MESSAGE(r.ok, r.message);

  CHECK_THROWS_AS(nn::Dropout(1.0), Error);
  CHECK_THROWS_AS(nn::Dropout(-0.1), Error);
  CHECK_NOTHROW(nn::Dropout(0.0));
}

TEST_CASE("nn layers: LayerNorm values, parameters and gradcheck") {
  nn::LayerNorm ln(3);
  CHECK(ln.repr() == "LayerNorm((3,), eps=1e-05, elementwise_affine=true)");
  check_values(ln.weight, {1, 1, 1});
  check_values(ln.bias, {0, 0, 0});
  ln.to(DType::f64);
  // [1, 2, 3]: mean 2, biased var 2/3
  const double d = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5);
  check_values(ln.forward(f64({1, 2, 3}, {1, 3})), {-d, 0, d}, 1e-12);
  set(ln.weight, {2, 1, 0.5});
  set(ln.bias, {0, 1, -1});
  check_values(ln.forward(f64({1, 2, 3}, {3})), {-2 * d, 1, 0.5 * d - 1}, 1e-12);

  Generator g(15);
  {
    NoGradGuard ng;
    ln.weight.copy_(randn({3}, DType::f64, &g));
    ln.bias.copy_(randn({3}, DType::f64, &g));
  }
  auto r = check_module(ln, randn64({2, 4, 3}, 16));
  CHECK_MESSAGE(r.ok, r.message);

  nn::LayerNorm bare(4, 1e-6, false);
  CHECK(bare.parameters().empty());
  bare.to(DType::f64);
  Tensor yb = bare.forward(f64({1, 2, 3, 4}, {4}));
  CHECK(stats(yb).mean == doctest::Approx(0.0).epsilon(1e-12));
  r = check_module(bare, randn64({3, 4}, 17));
  CHECK_MESSAGE(r.ok, r.message);

  CHECK_THROWS_AS(ln.forward(f64({1, 2}, {2})), Error);
  CHECK_THROWS_AS(nn::LayerNorm(0), Error);
  CHECK_THROWS_AS(nn::LayerNorm(3, -1.0), Error);
}

TEST_CASE("nn layers: Sequential names, forward chain, nesting and gradcheck") {
  manual_seed(4);
  auto inner = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 4),
                                                std::make_shared<nn::GELU>("tanh"));
  nn::Sequential seq(std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Tanh>(), inner,
                     std::make_shared<nn::LayerNorm>(4));
  seq.push_back(std::make_shared<nn::Linear>(4, 2));
  CHECK(seq.size() == 5);
  std::vector<std::string> names;
  for (auto& [n, p] : seq.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.0.weight", "2.0.bias",
                                          "3.weight", "3.bias", "4.weight", "4.bias"});

  nn::Sequential small(std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(3, 1));
  std::vector<std::string> sn;
  for (auto& [n, p] : small.named_parameters()) sn.push_back(n);
  CHECK(sn == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(contains(small.str(), "(1): ReLU()"));
  CHECK(contains(small.str(), "(2): Linear(in_features=3, out_features=1, bias=true)"));

  seq.to(DType::f64);
  // forward chains the children in order
  Tensor x = randn64({5, 3}, 18, false);
  Tensor manual = x;
  for (int64_t i = 0; i < seq.size(); ++i) manual = seq[i]->forward(manual);
  CHECK(seq.forward(x).to_vector<double>() == manual.to_vector<double>());
  CHECK(seq.forward(x).shape() == Shape{5, 2});

  auto r = check_module(seq, randn64({2, 3}, 19));
  CHECK_MESSAGE(r.ok, r.message);

  nn::Sequential empty_seq;
  CHECK(empty_seq.forward(x).same(x));
  CHECK_THROWS_AS(seq[5], Error);
  CHECK_THROWS_AS(seq.push_back(nullptr), Error);
  nn::Sequential from_vec(
      std::vector<std::shared_ptr<nn::Module>>{std::make_shared<nn::Identity>()});
  CHECK(from_vec.named_children()[0].first == "0");
}

TEST_CASE("nn layers: activation modules") {
  Tensor x = f64({-2.0, -0.5, 0.7, 1.5}, {4}, true);
  nn::ReLU relu_m;
  check_values(relu_m.forward(x), {0, 0, 0.7, 1.5});
  nn::Tanh tanh_m;
  check_values(tanh_m.forward(x),
               {std::tanh(-2.0), std::tanh(-0.5), std::tanh(0.7), std::tanh(1.5)});
  nn::Sigmoid sig_m;
  check_values(sig_m.forward(x), {1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(0.5)),
                                  1 / (1 + std::exp(-0.7)), 1 / (1 + std::exp(-1.5))});
  nn::GELU gelu_m;
  auto gelu_ref = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  check_values(gelu_m.forward(x), {gelu_ref(-2), gelu_ref(-0.5), gelu_ref(0.7), gelu_ref(1.5)});
  nn::GELU gelu_t("tanh");
  auto gelu_tanh = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  check_values(gelu_t.forward(x), {gelu_tanh(-2), gelu_tanh(-0.5), gelu_tanh(0.7), gelu_tanh(1.5)});
  nn::Identity id;
  CHECK(id.forward(x).same(x));

  CHECK(relu_m.repr() == "ReLU()");
  CHECK(gelu_m.repr() == "GELU(approximate='none')");
  CHECK(gelu_t.repr() == "GELU(approximate='tanh')");
  CHECK(tanh_m.repr() == "Tanh()");
  CHECK(sig_m.repr() == "Sigmoid()");
  CHECK(id.repr() == "Identity()");

  for (nn::Module* m : std::vector<nn::Module*>{&relu_m, &tanh_m, &sig_m, &gelu_m, &gelu_t, &id}) {
    INFO(m->repr());
    auto r = check_module(*m, f64({-2.0, -0.5, 0.7, 1.5, 0.3, -1.1}, {2, 3}, true));
    CHECK_MESSAGE(r.ok, r.message);
  }
  CHECK_THROWS_AS(nn::GELU("fast"), Error);
}

// ================================================================== losses
TEST_CASE("nn loss: nll_loss values, ignore_index, reductions and gradcheck") {
  // logp rows: log of [0.2, 0.3, 0.5], [0.6, 0.1, 0.3], [0.25, 0.25, 0.5]
  Tensor logp = log(f64({0.2, 0.3, 0.5, 0.6, 0.1, 0.3, 0.25, 0.25, 0.5}, {3, 3}));
  Tensor t = i64({2, 0, -100}, {3});
  check_values(nn::nll_loss(logp, t, -100, Reduction::none), {-std::log(0.5), -std::log(0.6), 0});
  check_values(nn::nll_loss(logp, t, -100, Reduction::sum), {-std::log(0.5) - std::log(0.6)});
  check_values(nn::nll_loss(logp, t), {(-std::log(0.5) - std::log(0.6)) / 2});
  CHECK(std::isnan(nn::nll_loss(logp, i64({1, 1, 1}, {3}), 1).item()));  // all ignored: NaN

  // nll_loss(log_softmax(x)) == cross_entropy(x), also with leading dims [B, T, V]
  Tensor x = randn64({2, 3, 5}, 20, false);
  Tensor tgt = i64({0, 4, 2, 1, 3, -100}, {2, 3});
  CHECK(nn::nll_loss(log_softmax(x, -1), tgt).item() ==
        doctest::Approx(cross_entropy(x, tgt).item()).epsilon(1e-12));
  CHECK(nn::nll_loss(log_softmax(x, -1), tgt, -100, Reduction::none).shape() == Shape{2, 3});

  Tensor lp = randn64({4, 6}, 21);
  Tensor tg = i64({5, -100, 0, 3}, {4});
  for (Reduction red : {Reduction::none, Reduction::sum, Reduction::mean}) {
    auto r = gradcheck(
        [&](const std::vector<Tensor>& v) { return nn::nll_loss(v[0], tg, -100, red); }, {lp});
    CHECK_MESSAGE(r.ok, r.message);
  }
  nn::NLLLoss mod({.ignore_index = 0, .reduction = Reduction::sum});
  CHECK(mod.repr() == "NLLLoss(ignore_index=0, reduction=sum)");
  check_values(mod(logp, i64({2, 0, 1}, {3})), {-std::log(0.5) - std::log(0.25)});
  auto r = gradcheck(
      [&](const std::vector<Tensor>& v) {
        return mod(v[0], i64({5, 0, 2, 0}, {4}));
      },
      {lp});
  CHECK_MESSAGE(r.ok, r.message);

  CHECK(contains(error_of([&] { nn::nll_loss(logp, f64({0, 1, 2}, {3})); }), "int64"));
  CHECK(contains(error_of([&] { nn::nll_loss(logp, i64({0, 1}, {2})); }), "shape"));
  CHECK(contains(error_of([&] { nn::nll_loss(logp, i64({0, 3, 1}, {3})); }), "out of range"));
  CHECK_THROWS_AS(nn::nll_loss(i64({0, 1}, {1, 2}), i64({0}, {1})), Error);
}

TEST_CASE("nn loss: mse_loss values and gradcheck") {
  Tensor x = f64({1, 2, 3}, {3}), y = f64({1, 0, 5}, {3});
  check_values(nn::mse_loss(x, y), {8.0 / 3});
  check_values(nn::mse_loss(x, y, Reduction::sum), {8.0});
  check_values(nn::mse_loss(x, y, Reduction::none), {0, 4, 4});
  nn::MSELoss mod;
  CHECK(mod.repr() == "MSELoss(reduction=mean)");
  check_values(mod(x, y), {8.0 / 3});
  for (Reduction red : {Reduction::none, Reduction::sum, Reduction::mean}) {
    auto r = gradcheck([&](const std::vector<Tensor>& v) { return nn::mse_loss(v[0], v[1], red); },
                       {randn64({2, 3}, 22), randn64({2, 3}, 23)});
    CHECK_MESSAGE(r.ok, r.message);
  }
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return mod(v[0], v[1]); },
                     {randn64({4}, 24), randn64({4}, 25)});
  CHECK_MESSAGE(r.ok, r.message);
  CHECK(contains(error_of([&] { nn::mse_loss(x, f64({1, 2}, {2})); }), "shape"));
  CHECK(contains(error_of([&] { nn::mse_loss(x, y.to(DType::f32)); }), "float32"));
  CHECK_THROWS_AS(nn::mse_loss(x, i64({1, 2, 3}, {3})), Error);
}

TEST_CASE("nn loss: binary_cross_entropy_with_logits values, stability and gradcheck") {
  auto ref = [](double x, double y) {
    return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
  };
  Tensor x = f64({-2, 0, 3, 100, -100}, {5});
  Tensor y = f64({0, 1, 0.25, 0, 1}, {5});
  check_values(nn::binary_cross_entropy_with_logits(x, y, Reduction::none),
               {ref(-2, 0), ref(0, 1), ref(3, 0.25), 100, 100}, 1e-12);
  double total = ref(-2, 0) + ref(0, 1) + ref(3, 0.25) + 200;
  check_values(nn::binary_cross_entropy_with_logits(x, y), {total / 5}, 1e-12);
  check_values(nn::binary_cross_entropy_with_logits(x, y, Reduction::sum), {total}, 1e-12);

  // dx = sigmoid(x) - y, also exactly at x = 0 and at large |x|
  Tensor xg = f64({0, 0, 50, -50}, {4}, true);
  Tensor yg = f64({0, 1, 1, 1}, {4});
  sum(nn::binary_cross_entropy_with_logits(xg, yg, Reduction::none)).backward();
  check_values(xg.grad(), {0.5, -0.5, 0, -1}, 1e-12);

  // pos_weight p: -[p y log s(x) + (1 - y) log(1 - s(x))]
  Tensor xp = f64({0.3, -1.2, 2.0, -0.4}, {2, 2}), yp = f64({1, 0, 0.5, 1}, {2, 2});
  Tensor pw = f64({2.0, 0.5}, {2});
  auto s = [](double v) { return 1 / (1 + std::exp(-v)); };
  auto refp = [&](double xv, double yv, double p) {
    return -(p * yv * std::log(s(xv)) + (1 - yv) * std::log(1 - s(xv)));
  };
  check_values(nn::binary_cross_entropy_with_logits(xp, yp, Reduction::none, pw),
               {refp(0.3, 1, 2), refp(-1.2, 0, 0.5), refp(2, 0.5, 2), refp(-0.4, 1, 0.5)}, 1e-12);

  // gradcheck over logits, targets and pos_weight
  for (Reduction red : {Reduction::none, Reduction::mean}) {
    Generator g(26);
    Tensor yt = uniform({3, 4}, 0, 1, TensorOptions(DType::f64).requires_grad(), &g);
    auto r = gradcheck(
        [&](const std::vector<Tensor>& v) {
          return nn::binary_cross_entropy_with_logits(v[0], v[1], red);
        },
        {randn64({3, 4}, 27), yt});
    CHECK_MESSAGE(r.ok, r.message);
    r = gradcheck(
        [&](const std::vector<Tensor>& v) {
          return nn::binary_cross_entropy_with_logits(v[0], v[1], red, v[2]);
        },
        {randn64({3, 4}, 28), yt,
         uniform({4}, 0.5, 2, TensorOptions(DType::f64).requires_grad(), &g)});
    CHECK_MESSAGE(r.ok, r.message);
  }

  // the module keeps pos_weight as a buffer that follows to()
  nn::BCEWithLogitsLoss mod(
      {.reduction = Reduction::none, .pos_weight = f64({2.0, 0.5}, {2}).to(DType::f32)});
  CHECK(mod.repr() == "BCEWithLogitsLoss(reduction=none, pos_weight=[2])");
  CHECK(mod.named_buffers().size() == 1);
  mod.to(DType::f64);
  CHECK(mod.pos_weight.dtype() == DType::f64);
  check_values(mod(xp, yp),
               {refp(0.3, 1, 2), refp(-1.2, 0, 0.5), refp(2, 0.5, 2), refp(-0.4, 1, 0.5)}, 1e-12);
  nn::BCEWithLogitsLoss plain;
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return plain(v[0], v[1]); },
                     {randn64({5}, 29), f64({0, 1, 1, 0, 0.5}, {5})});
  CHECK_MESSAGE(r.ok, r.message);

  CHECK(
      contains(error_of([&] { nn::binary_cross_entropy_with_logits(x, f64({1}, {1})); }), "shape"));
  CHECK_THROWS_AS(nn::binary_cross_entropy_with_logits(x, y.to(DType::f32)), Error);
  CHECK(
      contains(error_of([&] {
                 nn::binary_cross_entropy_with_logits(xp, yp, Reduction::mean, f64({1, 2, 3}, {3}));
               }),
               "pos_weight"));
}

TEST_CASE("nn loss: CrossEntropyLoss wraps cross_entropy") {
  Tensor x = randn64({4, 5}, 30);
  Tensor t = i64({1, 0, -100, 4}, {4});
  nn::CrossEntropyLoss ce;
  CHECK(ce.repr() == "CrossEntropyLoss(ignore_index=-100, label_smoothing=0, reduction=mean)");
  CHECK(ce(x, t).item() == doctest::Approx(cross_entropy(x, t).item()).epsilon(1e-14));
  // hand value: one row of logits [0, ln 2, ln 5] -> p(target 2) = 5/8
  check_values(ce(log(f64({1, 2, 5}, {1, 3})), i64({2}, {1})), {-std::log(5.0 / 8)}, 1e-12);

  nn::CrossEntropyLoss smooth(
      {.ignore_index = 0, .label_smoothing = 0.1, .reduction = Reduction::sum});
  CrossEntropyOptions o{.ignore_index = 0, .label_smoothing = 0.1, .reduction = Reduction::sum};
  Tensor t0 = i64({1, 0, 3, 4}, {4});  // row 1 ignored
  CHECK(smooth(x, t0).item() == doctest::Approx(cross_entropy(x, t0, o).item()).epsilon(1e-14));
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return ce(v[0], t); }, {x});
  CHECK_MESSAGE(r.ok, r.message);
  r = gradcheck([&](const std::vector<Tensor>& v) { return smooth(v[0], t0); }, {x});
  CHECK_MESSAGE(r.ok, r.message);
  CHECK_THROWS_AS(nn::CrossEntropyLoss({.label_smoothing = 1.0}), Error);
  CHECK_THROWS_AS(ce(x, i64({1, 2}, {2})), Error);
  // PyTorch's layout: [B, C, T] with class_dim 1 equals the class-last loss of [B, T, C]
  nn::CrossEntropyLoss torch_ce({.class_dim = 1});
  CHECK(torch_ce.repr() == "CrossEntropyLoss(ignore_index=-100, label_smoothing=0, reduction=mean, class_dim=1)");
  Tensor xbct = randn64({2, 5, 3}, 31);
  Tensor tbt = i64({1, 0, 4, 2, 3, 3}, {2, 3});
  CHECK(torch_ce(xbct, tbt).item() == doctest::Approx(ce(xbct.transpose(1, 2), tbt).item()).epsilon(1e-14));
  // losses have no one-tensor forward
  nn::Module& base = ce;
  CHECK(contains(error_of([&] { base.forward(x); }), "CrossEntropyLoss"));
}
