// Optimisers, schedulers, gradient clipping and accumulation.
//
// Expected values are hand-computed in this file: plain scalar double code following the
// algorithms published in PyTorch's documentation (torch.optim.SGD/Adam/AdamW/Adagrad; the
// schedules' closed forms), written independently of graft's kernels. No Python fixtures.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numbers>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/clip.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "ops/cpu/cpu_kernels.h"

using namespace graft;
using graft::optim::ParamGroup;

namespace {

using Vec = std::vector<double>;
constexpr int kN = 37;  // covers full SIMD batches and a scalar tail for float and double

// Deterministic values of both signs and varied magnitudes (wave(n, 0)[0] == 0).
Vec wave(int n, double phase, double scale = 1.0) {
  Vec v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * std::sin(0.37 * i + phase) * (1 + 0.05 * i);
  return v;
}
// `v` rounded to `dt` (so a double reference sees the same inputs as a float32 run).
Vec rounded(Vec v, DType dt) {
  if (dt == DType::f32)
    for (double& x : v) x = double(float(x));
  return v;
}
Tensor param(const Vec& v, DType dt = DType::f64) {
  Tensor t = from_vector(v, {int64_t(v.size())}, dt);
  t.requires_grad_();
  return t;
}
void set_grad(const Tensor& p, const Vec& g) {
  Tensor h = p;
  h.set_grad(from_vector(g, p.shape(), p.dtype()));
}
Vec vals(const Tensor& t) { return t.to_vector<double>(); }

// |a - b| <= atol + rtol |b| everywhere (one assertion, naming the worst element).
void check_close(const Vec& a, const Vec& b, double atol, double rtol) {
  REQUIRE(a.size() == b.size());
  size_t worst = 0;
  double worst_r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double r = std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i]));
    if (!(r <= worst_r)) worst = i, worst_r = r;  // NaN counts as worst
  }
  INFO("worst element " << worst << ": " << a[worst] << " vs " << b[worst]);
  CHECK(worst_r <= 1.0);
}
void check_same(const Tensor& a, const Tensor& b) {  // bit-identical values
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  CHECK(vals(a) == vals(b));
}

// ---------------------------------------------------------------- reference algorithms
// torch.optim.SGD docs: g += wd p; b = mu b + (1 - tau) g (b = g at t = 1);
// g = nesterov ? g + mu b : b; p -= lr g
struct RefSGD {
  double lr, mu = 0, tau = 0, wd = 0;
  bool nesterov = false;
  Vec b;
  int t = 0;
  void step(Vec& p, const Vec& grad) {
    ++t;
    if (b.empty()) b.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + wd * p[i];
      if (mu != 0) {
        b[i] = t > 1 ? mu * b[i] + (1 - tau) * g : g;
        g = nesterov ? g + mu * b[i] : b[i];
      }
      p[i] -= lr * g;
    }
  }
};
// torch.optim.Adam / AdamW docs: (AdamW: p -= lr wd p) (Adam: g += wd p);
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; mhat = m / (1 - b1^t); vhat = v / (1 - b2^t);
// p -= lr mhat / (sqrt(vhat) + eps)
struct RefAdam {
  double lr, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0;
  bool decoupled = false;
  Vec m, v;
  int t = 0;
  void step(Vec& p, const Vec& grad) {
    ++t;
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (decoupled) p[i] -= lr * wd * p[i];
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};
// torch.optim.Adagrad docs: clr = lr / (1 + (t - 1) eta); g += wd p; sum += g^2;
// p -= clr g / (sqrt(sum) + eps)
struct RefAdagrad {
  double lr, eta = 0, wd = 0, init = 0, eps = 1e-10;
  Vec sum;
  int t = 0;
  void step(Vec& p, const Vec& grad) {
    ++t;
    if (sum.empty()) sum.assign(p.size(), init);
    const double clr = lr / (1 + (t - 1) * eta);
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = grad[i] + wd * p[i];
      sum[i] += g * g;
      p[i] -= clr * g / (std::sqrt(sum[i]) + eps);
    }
  }
};

// Three steps of `opt` (over one parameter of kN elements) against `ref`, in dtype dt.
template <class Ref, class Make>
void check_three_steps(DType dt, Ref ref, const Make& make, double atol, double rtol) {
  Vec p0 = rounded(wave(kN, 0.3), dt);
  Tensor p = param(p0, dt);
  std::unique_ptr<optim::Optimizer> opt = make(std::vector<Tensor>{p});
  for (int k = 0; k < 3; ++k) {
    const Vec g = rounded(wave(kN, 1.1 + k, 0.5 + k), dt);
    set_grad(p, g);
    opt->step();
    ref.step(p0, g);
    check_close(vals(p), p0, atol, rtol);
  }
  CHECK(opt->state(p)->step == 3);
}

}  // namespace

// ---------------------------------------------------------------- update rules
TEST_CASE("optim: SGD matches the published algorithm for 3 steps") {
  struct Cfg { optim::SGDOptions o; };
  const Cfg cfgs[] = {
      {{.lr = 0.1}},
      {{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}},
      {{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.02, .nesterov = true}},
  };
  for (DType dt : {DType::f64, DType::f32})
    for (const Cfg& c : cfgs) {
      const std::string dts(dtype_name(dt));
      CAPTURE(dts);
      CAPTURE(c.o.momentum);
      RefSGD ref{.lr = c.o.lr, .mu = c.o.momentum, .tau = c.o.dampening, .wd = c.o.weight_decay,
                 .nesterov = c.o.nesterov};
      const double tol = dt == DType::f64 ? 1e-13 : 2e-6;
      check_three_steps(dt, ref, [&](std::vector<Tensor> ps) {
        return std::make_unique<optim::SGD>(ps, c.o);
      }, tol, tol);
    }
}

TEST_CASE("optim: Adam and AdamW match the published algorithm for 3 steps") {
  for (DType dt : {DType::f64, DType::f32}) {
    const std::string dts(dtype_name(dt));
    CAPTURE(dts);
    const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
    SUBCASE("Adam") {
      check_three_steps(dt, RefAdam{.lr = 0.01}, [](std::vector<Tensor> ps) {
        return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 0.01});
      }, tol, tol);
    }
    SUBCASE("Adam with L2 weight decay and other betas") {
      RefAdam ref{.lr = 0.02, .b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .wd = 0.1};
      check_three_steps(dt, ref, [](std::vector<Tensor> ps) {
        return std::make_unique<optim::Adam>(
            ps, optim::AdamOptions{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                                   .weight_decay = 0.1});
      }, tol, tol);
    }
    SUBCASE("AdamW (decoupled decay, PyTorch's default 0.01)") {
      check_three_steps(dt, RefAdam{.lr = 0.01, .wd = 0.01, .decoupled = true},
                        [](std::vector<Tensor> ps) {
                          return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01});
                        }, tol, tol);
    }
    SUBCASE("AdamW with a large decay") {
      check_three_steps(dt, RefAdam{.lr = 0.05, .wd = 0.5, .decoupled = true},
                        [](std::vector<Tensor> ps) {
                          return std::make_unique<optim::AdamW>(
                              ps, optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.5});
                        }, tol, tol);
    }
  }
}

TEST_CASE("optim: Adagrad matches the published algorithm for 3 steps") {
  for (DType dt : {DType::f64, DType::f32}) {
    const std::string dts(dtype_name(dt));
    CAPTURE(dts);
    const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
    check_three_steps(dt, RefAdagrad{.lr = 0.1}, [](std::vector<Tensor> ps) {
      return std::make_unique<optim::Adagrad>(ps, optim::AdagradOptions{.lr = 0.1});
    }, tol, tol);
    RefAdagrad ref{.lr = 0.1, .eta = 0.5, .wd = 0.05, .init = 0.1, .eps = 1e-6};
    check_three_steps(dt, ref, [](std::vector<Tensor> ps) {
      return std::make_unique<optim::Adagrad>(
          ps, optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.5, .weight_decay = 0.05,
                                    .initial_accumulator_value = 0.1, .eps = 1e-6});
    }, tol, tol);
  }
}

TEST_CASE("optim: Adam state holds the moments of the published algorithm") {
  Vec p0 = wave(kN, 0.3);
  Tensor p = param(p0);
  optim::Adam opt({p}, {.lr = 0.01, .weight_decay = 0.1});
  CHECK(opt.state(p) == nullptr);  // lazily created
  RefAdam ref{.lr = 0.01, .wd = 0.1};
  for (int k = 0; k < 3; ++k) {
    const Vec g = wave(kN, 2.0 + k);
    set_grad(p, g);
    opt.step();
    ref.step(p0, g);
  }
  const optim::ParamState* s = opt.state(p);
  REQUIRE(s != nullptr);
  CHECK(s->step == 3);
  check_close(vals(s->get("exp_avg")), ref.m, 1e-15, 1e-13);
  check_close(vals(s->get("exp_avg_sq")), ref.v, 1e-15, 1e-13);
}

// ---------------------------------------------------------------- fused == reference kernels
TEST_CASE("optim: fused kernels equal the scalar reference kernels") {
  // Large enough to split over OpenMP threads; odd so every path has a scalar tail.
  const int64_t n = 3 * cpu::kParallelGrain + 13;
  for (DType dt : {DType::f32, DType::f64}) {
    const std::string dts(dtype_name(dt));
    CAPTURE(dts);
    // Each buffer set: param, grad, state a, state b (fast and reference copies).
    // values in [-0.5, 0.5], or in [0.01, 1.01] for second moments (positive); the views start
    // one element into their storage, so SIMD loads and stores are unaligned
    auto make = [&](double phase, bool positive) {
      Vec v(n + 1);
      for (int64_t i = 0; i <= n; ++i) {
        const double s = std::sin(0.001 * i + phase);
        v[i] = positive ? 0.01 + s * s : 0.5 * s;
      }
      return from_vector(v, {n + 1}, dt).narrow(0, 1, n);
    };
    // nstate: how many state buffers the kernel uses; positive_a: its first one is a sum of squares
    auto run = [&](auto&& kernel_fast, auto&& kernel_ref, int nstate, bool positive_a = false) {
      Tensor p = make(0.1, false), g = make(0.7, false), a = make(1.3, positive_a),
             b = make(2.1, true);
      Tensor p2 = make(0.1, false), a2 = make(1.3, positive_a), b2 = make(2.1, true);
      kernel_fast(p.kview(), g.kview(), a.kview(), b.kview());
      kernel_ref(p2.kview(), g.kview(), a2.kview(), b2.kview());
      // Both versions write every a*b+c as an explicit FMA: with FMA hardware they agree bit
      // for bit; without it xsimd may split a batch FMA into a multiply and an add.
#if defined(__FMA__)
      auto same = [](const Tensor& x, const Tensor& y) { check_same(x, y); };
#else
      const double tol = dt == DType::f32 ? 1e-6 : 1e-14;
      auto same = [&](const Tensor& x, const Tensor& y) { check_close(vals(x), vals(y), tol, tol); };
#endif
      same(p, p2);
      same(a, a2);
      if (nstate > 1) same(b, b2);
    };
    for (bool decoupled : {false, true}) {
      AdamStepArgs args;
      args.lr = 0.01;
      args.weight_decay = 0.1;
      args.decoupled = decoupled;
      args.bias_correction1 = 1 - std::pow(args.beta1, 3);
      args.bias_correction2 = 1 - std::pow(args.beta2, 3);
      run([&](auto p, auto g, auto m, auto v) { cpu::adam_step(p, g, m, v, args); },
          [&](auto p, auto g, auto m, auto v) { cpu::ref::adam_step(p, g, m, v, args); }, 2);
    }
    for (int variant = 0; variant < 4; ++variant) {
      SgdStepArgs args;
      args.lr = 0.1;
      args.weight_decay = 0.01;
      args.momentum = variant == 0 ? 0.0 : 0.9;
      args.dampening = variant == 1 ? 0.1 : 0.0;
      args.nesterov = variant == 2;
      args.first_step = variant == 3;
      run([&](auto p, auto g, auto buf, auto) { cpu::sgd_step(p, g, buf, args); },
          [&](auto p, auto g, auto buf, auto) { cpu::ref::sgd_step(p, g, buf, args); }, 1);
    }
    AdagradStepArgs args;
    args.lr = 0.05;
    args.weight_decay = 0.01;
    run([&](auto p, auto g, auto s, auto) { cpu::adagrad_step(p, g, s, args); },
        [&](auto p, auto g, auto s, auto) { cpu::ref::adagrad_step(p, g, s, args); }, 1, true);
  }
}

TEST_CASE("optim: step() through the reference kernels gives the same result") {
  auto train = [](bool reference) {
    set_use_reference_kernels(reference);
    Tensor p = param(wave(kN, 0.2), DType::f32);
    optim::AdamW opt({p}, {.lr = 0.01, .weight_decay = 0.1});
    for (int k = 0; k < 3; ++k) {
      set_grad(p, wave(kN, 0.5 * k));
      opt.step();
    }
    set_use_reference_kernels(false);
    return vals(p);
  };
  check_close(train(true), train(false), 1e-7, 1e-6);
}

// ---------------------------------------------------------------- groups
TEST_CASE("optim: param groups with their own lr and weight decay") {
  Vec a0 = wave(kN, 0.1), b0 = wave(5, 0.9);
  Tensor a = param(a0), b = param(b0);
  // group 0 inherits lr from the options; group 1 sets both
  optim::Adam opt(std::vector<ParamGroup>{{.params = {a}, .weight_decay = 0.1},
                                          {.params = {b}, .lr = 0.05, .weight_decay = 0.0}},
                  {.lr = 0.01});
  REQUIRE(opt.param_groups().size() == 2);
  CHECK(opt.param_groups()[0].lr == 0.01);
  CHECK(opt.param_groups()[1].lr == 0.05);
  CHECK(opt.param_groups()[1].beta1 == 0.9);  // inherited
  RefAdam ra{.lr = 0.01, .wd = 0.1}, rb{.lr = 0.05};
  for (int k = 0; k < 3; ++k) {
    const Vec ga = wave(kN, 1.0 + k), gb = wave(5, 2.0 - k);
    set_grad(a, ga);
    set_grad(b, gb);
    opt.step();
    ra.step(a0, ga);
    rb.step(b0, gb);
  }
  check_close(vals(a), a0, 1e-12, 1e-12);
  check_close(vals(b), b0, 1e-12, 1e-12);

  // add_param_group: numbered after the others, inheriting the options
  Tensor c = param(wave(3, 0.0));
  opt.add_param_group({.params = {c}});
  CHECK(opt.param_groups()[2].lr == 0.01);
  CHECK_THROWS_AS(opt.add_param_group({.params = {a}}), Error);  // already optimised
}

TEST_CASE("optim: BERT no-decay grouping by name") {
  using optim::is_no_decay_name;
  CHECK(is_no_decay_name("encoder.layer.0.attention.output.dense.bias"));
  CHECK(is_no_decay_name("encoder.layer.0.attention.output.LayerNorm.weight"));
  CHECK(is_no_decay_name("embeddings.LayerNorm.bias"));
  CHECK(is_no_decay_name("h.0.ln_1.weight"));
  CHECK(is_no_decay_name("ln_f.weight"));
  CHECK(is_no_decay_name("layers.1.norm2.weight"));
  CHECK(is_no_decay_name("self_attn.in_proj_bias"));
  CHECK(is_no_decay_name("final_layer_norm.weight"));
  CHECK(is_no_decay_name("ln.weight"));
  CHECK_FALSE(is_no_decay_name("encoder.layer.0.attention.output.dense.weight"));
  CHECK_FALSE(is_no_decay_name("embeddings.word_embeddings.weight"));
  CHECK_FALSE(is_no_decay_name("lnk.weight"));
  CHECK_FALSE(is_no_decay_name("kiln.weight"));

  // With zero grads AdamW's Adam term is 0, so decayed parameters shrink by exactly
  // (1 - lr wd) and the others stay put.
  nn::NamedTensors named = {{"dense.weight", param(wave(6, 0.1))},
                            {"dense.bias", param(wave(3, 0.2))},
                            {"LayerNorm.weight", param(wave(3, 0.3))},
                            {"LayerNorm.bias", param(wave(3, 0.4))},
                            {"decoder.weight", param(wave(4, 0.5))}};
  auto groups = optim::param_groups_no_decay(named, 0.01);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].params.size() == 2);
  CHECK(groups[1].params.size() == 3);
  CHECK(groups[0].weight_decay == 0.01);
  CHECK(groups[1].weight_decay == 0.0);
  CHECK(std::isnan(groups[0].lr));  // inherits the optimizer's lr
  std::vector<Vec> before;
  for (auto& [n, t] : named) before.push_back(vals(t));
  optim::AdamW opt(groups, {.lr = 0.1});
  for (auto& [n, t] : named) set_grad(t, Vec(t.numel(), 0.0));
  opt.step();
  for (size_t i = 0; i < named.size(); ++i) {
    CAPTURE(named[i].first);
    Vec want = before[i];
    if (!optim::is_no_decay_name(named[i].first))
      for (double& x : want) x -= 0.1 * 0.01 * x;
    check_close(vals(named[i].second), want, 1e-15, 1e-14);
  }
  // all decayed or none: one group
  CHECK(optim::param_groups_no_decay({{"a.bias", param({1.0})}}, 0.1).size() == 1);
}

// ---------------------------------------------------------------- step() behaviour
TEST_CASE("optim: parameters without a grad are skipped, zero_grad drops or zeroes grads") {
  Tensor a = param(wave(kN, 0.1)), b = param(wave(4, 0.2));
  const Vec b0 = vals(b);
  optim::SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
  set_grad(a, wave(kN, 0.5));
  opt.step();
  CHECK(vals(b) == b0);
  CHECK(opt.state(b) == nullptr);
  REQUIRE(opt.state(a) != nullptr);
  CHECK(opt.state(a)->get("momentum_buffer").defined());
  opt.zero_grad(/*set_to_none=*/false);
  REQUIRE(a.grad().defined());
  CHECK(vals(a.grad()) == Vec(kN, 0.0));
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  // SGD without momentum keeps no buffer
  optim::SGD plain({b}, {.lr = 0.1});
  set_grad(b, wave(4, 0.3));
  plain.step();
  CHECK_FALSE(plain.state(b)->get("momentum_buffer").defined());
}

TEST_CASE("optim: a non-contiguous parameter is updated like a contiguous one") {
  Tensor base = from_vector(wave(12, 0.4), {3, 4}, DType::f64);
  Tensor nc = base.t().detach();  // [4, 3], strided
  nc.requires_grad_();
  REQUIRE_FALSE(nc.is_contiguous());
  Tensor c = nc.contiguous().detach();
  c.requires_grad_();
  optim::Adam o1({nc}, {.lr = 0.1}), o2({c}, {.lr = 0.1});
  for (int k = 0; k < 2; ++k) {
    Tensor g = from_vector(wave(12, 1.0 + k), {4, 3}, DType::f64);
    nc.set_grad(g);
    c.set_grad(g);
    o1.step();
    o2.step();
  }
  CHECK(vals(nc) == vals(c));
  CHECK(vals(base.t()) == vals(c));  // written through to the viewed storage
}

TEST_CASE("optim: step() rejects a grad that does not match its parameter, changing nothing") {
  Tensor a = param(wave(kN, 0.1)), b = param(wave(4, 0.2));
  optim::Adam opt({a, b}, {.lr = 0.1});
  set_grad(a, wave(kN, 0.3));
  b.set_grad(from_vector(wave(5, 0.0), {5}, DType::f64));  // wrong shape
  const Vec a0 = vals(a);
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("grad of parameter 1"), Error);
  CHECK(vals(a) == a0);
  CHECK(opt.state(a) == nullptr);
  b.set_grad(from_vector(wave(4, 0.0), {4}, DType::f32));  // wrong dtype
  CHECK_THROWS_AS(opt.step(), Error);
  CHECK(vals(a) == a0);
  // state that no longer fits its parameter (dtype changed after the first step)
  b.set_grad(Tensor());
  opt.step();
  nn::set_data(a, a.detach().to(DType::f32));
  a.set_grad(from_vector(wave(kN, 0.3), {kN}, DType::f32));
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("state 'exp_avg'"), Error);
}

TEST_CASE("optim: constructor errors") {
  Tensor p = param({1.0, 2.0});
  CHECK_THROWS_AS(optim::SGD(std::vector<Tensor>{}), Error);
  CHECK_THROWS_AS(optim::SGD({p}, {.lr = -1}), Error);
  CHECK_THROWS_AS(optim::SGD({p}, {.lr = 0.1, .nesterov = true}), Error);  // no momentum
  CHECK_THROWS_AS(optim::SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                  Error);
  CHECK_THROWS_AS(optim::Adam({p}, {.beta1 = 1.0}), Error);
  CHECK_THROWS_AS(optim::Adam({p}, {.eps = -1e-8}), Error);
  CHECK_THROWS_AS(optim::AdamW({p}, {.weight_decay = -0.1}), Error);
  CHECK_THROWS_AS(optim::Adagrad({p}, {.lr_decay = -1}), Error);
  CHECK_THROWS_AS(optim::Adam({p, p}), Error);                        // duplicate
  CHECK_THROWS_AS(optim::Adam({from_vector(std::vector<int64_t>{1, 2}, {2})}), Error);  // int
  CHECK_THROWS_AS(optim::Adam({Tensor()}), Error);
  Tensor nonleaf = mul(p, 2.0);
  CHECK_THROWS_AS(optim::Adam({nonleaf}), Error);
}

// ---------------------------------------------------------------- state_dict
namespace {
// Trains `ps` for steps [from, to) with deterministic grads.
void train(optim::Optimizer& opt, const std::vector<Tensor>& ps, int from, int to) {
  for (int k = from; k < to; ++k) {
    for (size_t i = 0; i < ps.size(); ++i)
      set_grad(ps[i], rounded(wave(int(ps[i].numel()), 0.3 * k + i, 1 + k % 3), ps[i].dtype()));
    opt.step();
  }
}
std::vector<Tensor> fresh_params() {
  return {param(rounded(wave(kN, 0.1), DType::f32), DType::f32),
          param(rounded(wave(8, 0.7), DType::f32), DType::f32)};
}
std::vector<Tensor> clones(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (auto& p : ps) {
    Tensor c = p.detach().clone();
    c.requires_grad_();
    out.push_back(c);
  }
  return out;
}
template <class Make> void check_round_trip(const Make& make) {
  // 6 uninterrupted steps
  std::vector<Tensor> ref = fresh_params();
  auto o_ref = make(ref);
  train(*o_ref, ref, 0, 6);
  // 3 steps, save, restore into a new optimizer over copies of the parameters, 3 more
  std::vector<Tensor> a = fresh_params();
  auto o_a = make(a);
  train(*o_a, a, 0, 3);
  const nn::NamedTensors sd = o_a->state_dict();
  std::vector<Tensor> b = clones(a);
  auto o_b = make(b);
  o_b->load_state_dict(sd);
  train(*o_a, a, 3, 4);  // the saved dict must not share tensors with the restored optimizer
  train(*o_b, b, 3, 6);
  for (size_t i = 0; i < b.size(); ++i) {
    check_same(b[i], ref[i]);
    const optim::ParamState *sb = o_b->state(b[i]), *sr = o_ref->state(ref[i]);
    REQUIRE(sb != nullptr);
    CHECK(sb->step == sr->step);
    REQUIRE(sb->buffers.size() == sr->buffers.size());
    for (size_t j = 0; j < sb->buffers.size(); ++j) check_same(sb->buffers[j].second, sr->buffers[j].second);
  }
}
}  // namespace

TEST_CASE("optim: state_dict round trip continues bit-identically") {
  SUBCASE("AdamW") {
    check_round_trip([](std::vector<Tensor> ps) {
      return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01});
    });
  }
  SUBCASE("Adam, two groups") {
    check_round_trip([](std::vector<Tensor> ps) {
      return std::make_unique<optim::Adam>(
          std::vector<ParamGroup>{{.params = {ps[0]}}, {.params = {ps[1]}, .lr = 0.1}},
          optim::AdamOptions{.lr = 0.01, .weight_decay = 0.05});
    });
  }
  SUBCASE("SGD with momentum") {
    check_round_trip([](std::vector<Tensor> ps) {
      return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9,
                                                                 .nesterov = true});
    });
  }
  SUBCASE("Adagrad") {
    check_round_trip([](std::vector<Tensor> ps) {
      return std::make_unique<optim::Adagrad>(ps, optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.1});
    });
  }
}

TEST_CASE("optim: state_dict keys and the restored group lr") {
  std::vector<Tensor> ps = fresh_params();
  optim::Adam opt(ps, {.lr = 0.01});
  train(opt, ps, 0, 2);
  opt.param_groups()[0].lr = 0.005;  // as a scheduler would
  const nn::NamedTensors sd = opt.state_dict();
  auto find = [&](const std::string& k) {
    for (auto& [n, t] : sd)
      if (n == k) return t;
    FAIL("missing key " << k);
    return Tensor();
  };
  CHECK(find("group.0.lr").item<double>() == 0.005);
  CHECK(find("group.0.lr").dtype() == DType::f64);
  CHECK(find("group.0.params").to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  Tensor step = find("state.1.step");
  CHECK(step.dim() == 0);
  CHECK(step.dtype() == DType::f64);
  CHECK(step.item<double>() == 2);
  CHECK(find("state.0.exp_avg").shape() == ps[0].shape());
  CHECK(find("state.1.exp_avg_sq").shape() == ps[1].shape());

  std::vector<Tensor> qs = clones(ps);
  optim::Adam other(qs, {.lr = 0.01});
  other.load_state_dict(sd);
  CHECK(other.param_groups()[0].lr == 0.005);
  CHECK(other.state(qs[1])->step == 2);
}

TEST_CASE("optim: load_state_dict validates and leaves the optimizer unchanged on errors") {
  std::vector<Tensor> ps = fresh_params();
  optim::Adam opt(ps, {.lr = 0.01});
  train(opt, ps, 0, 2);
  const nn::NamedTensors good = opt.state_dict();

  std::vector<Tensor> qs = clones(ps);
  optim::Adam target(qs, {.lr = 0.02});
  train(target, qs, 5, 6);
  auto snapshot = [&] {
    std::vector<Vec> s;
    for (auto& [n, t] : target.state_dict()) s.push_back(vals(t));
    return s;
  };
  const auto before = snapshot();
  auto edited = [&](const std::string& key, Tensor t) {
    nn::NamedTensors sd = good;
    for (auto& [n, v] : sd)
      if (n == key) v = t;
    return sd;
  };
  auto dropped = [&](const std::string& key) {
    nn::NamedTensors sd;
    for (auto& kv : good)
      if (kv.first != key) sd.push_back(kv);
    return sd;
  };
  auto expect_error = [&](const nn::NamedTensors& sd, const char* what) {
    CAPTURE(what);
    CHECK_THROWS_AS(target.load_state_dict(sd), Error);
    CHECK(snapshot() == before);
  };
  expect_error(edited("state.0.exp_avg", zeros({kN + 1}, DType::f32)), "state shape");
  expect_error(edited("state.1.step", from_vector(Vec{1, 2}, {2}, DType::f64)), "step size");
  expect_error(edited("state.1.step", scalar_tensor(-1, DType::f64)), "negative step");
  expect_error(edited("group.0.lr", scalar_tensor(-1, DType::f64)), "invalid lr");
  expect_error(edited("group.0.params", from_vector(std::vector<int64_t>{0}, {1})), "group size");
  expect_error(dropped("group.0.beta2"), "missing hyper-parameter");
  expect_error(dropped("state.0.exp_avg_sq"), "missing state buffer");
  expect_error(dropped("state.0.step"), "missing step");
  nn::NamedTensors extra = good;
  extra.emplace_back("state.0.momentum_buffer", zeros({kN}, DType::f32));
  expect_error(extra, "buffer of another optimizer");
  nn::NamedTensors far = good;
  far.emplace_back("state.7.step", scalar_tensor(1, DType::f64));
  expect_error(far, "parameter index out of range");
  nn::NamedTensors junk = good;
  junk.emplace_back("hello", scalar_tensor(1));
  expect_error(junk, "unknown key");
  nn::NamedTensors twogroups = good;
  twogroups.emplace_back("group.1.lr", scalar_tensor(1, DType::f64));
  expect_error(twogroups, "group count");

  // an SGD state dict does not load into Adam
  optim::SGD sgd(clones(ps), {.lr = 0.1, .momentum = 0.9});
  train(sgd, sgd.param_groups()[0].params, 0, 1);
  expect_error(sgd.state_dict(), "other optimizer");
}

// ---------------------------------------------------------------- schedulers
namespace {
// An SGD over two groups with base lrs 0.1 and 0.02.
struct TwoGroups {
  Tensor a = param({1.0}), b = param({2.0});
  optim::SGD opt{std::vector<ParamGroup>{{.params = {a}, .lr = 0.1}, {.params = {b}, .lr = 0.02}}};
};
// The groups' lr at epochs 0..n-1 (epoch 0: right after construction) vs base * f(e).
template <class F> void check_schedule(optim::LRScheduler& s, TwoGroups& t, int n, const F& f) {
  for (int e = 0; e < n; ++e) {
    if (e > 0) s.step();
    CAPTURE(e);
    REQUIRE(s.last_epoch() == e);
    CHECK(t.opt.param_groups()[0].lr == doctest::Approx(0.1 * f(e)).epsilon(1e-12));
    CHECK(t.opt.param_groups()[1].lr == doctest::Approx(0.02 * f(e)).epsilon(1e-12));
    CHECK(s.get_last_lr()[0] == t.opt.param_groups()[0].lr);
  }
}
}  // namespace

TEST_CASE("scheduler: StepLR and ExponentialLR") {
  TwoGroups t;
  optim::StepLR s(t.opt, 3, 0.5);
  check_schedule(s, t, 10, [](int e) { return e < 3 ? 1.0 : e < 6 ? 0.5 : e < 9 ? 0.25 : 0.125; });
  TwoGroups u;
  optim::ExponentialLR x(u.opt, 0.9);
  check_schedule(x, u, 10, [](int e) {
    double f = 1;
    for (int i = 0; i < e; ++i) f *= 0.9;
    return f;
  });
}

TEST_CASE("scheduler: CosineWithWarmup") {
  TwoGroups t;
  optim::CosineWithWarmup s(t.opt, 4, 12, 0.1);
  check_schedule(s, t, 16, [](int e) {
    if (e < 4) return e / 4.0;  // linear warmup
    const double progress = std::min(1.0, (e - 4) / 8.0);
    return 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * progress));
  });
  CHECK(s.factor(4) == doctest::Approx(1.0));
  CHECK(s.factor(8) == doctest::Approx(0.55));
  CHECK(s.factor(12) == doctest::Approx(0.1));
  CHECK(s.factor(100) == doctest::Approx(0.1));
}

TEST_CASE("scheduler: LinearWarmupDecay (BERT)") {
  TwoGroups t;
  optim::LinearWarmupDecay s(t.opt, 3, 10);
  const double want[] = {0, 1 / 3.0, 2 / 3.0, 1, 6 / 7.0, 5 / 7.0, 4 / 7.0, 3 / 7.0, 2 / 7.0,
                         1 / 7.0, 0, 0, 0};
  check_schedule(s, t, 13, [&](int e) { return want[e]; });
}

TEST_CASE("scheduler: Noam (inverse square root after warmup)") {
  Tensor p = param({1.0});
  optim::Adam opt({p}, {.lr = 1.0, .beta2 = 0.98, .eps = 1e-9});
  optim::Noam s(opt, 512, 4000);
  auto paper = [](double step) {  // d^-0.5 min(step^-0.5, step warmup^-1.5)
    return std::pow(512.0, -0.5) * std::min(std::pow(step, -0.5), step * std::pow(4000.0, -1.5));
  };
  double peak = 0;
  for (int e = 0; e < 10000; ++e) {
    if (e > 0) s.step();
    const double lr = opt.param_groups()[0].lr;
    if (e % 997 == 0 || e == 3999 || e == 4000) CHECK(lr == doctest::Approx(paper(e + 1)).epsilon(1e-12));
    peak = std::max(peak, lr);
  }
  CHECK(peak == doctest::Approx(std::pow(512.0 * 4000.0, -0.5)));  // at step 4000
  opt.param_groups()[0].lr = 1.0;  // a new scheduler takes the current lr as its base
  optim::Noam scaled(opt, 512, 4000, 2.0);
  CHECK(opt.param_groups()[0].lr == doctest::Approx(2 * paper(1)));
}

TEST_CASE("scheduler: state_dict round trip and errors") {
  TwoGroups t;
  optim::CosineWithWarmup s(t.opt, 4, 20);
  for (int i = 0; i < 7; ++i) s.step();
  const nn::NamedTensors sd = s.state_dict();

  TwoGroups u;
  u.opt.param_groups()[0].lr = 0.3;  // e.g. restored from an optimizer checkpoint mid-schedule
  optim::CosineWithWarmup r(u.opt, 4, 20);
  r.load_state_dict(sd);
  CHECK(r.last_epoch() == 7);
  CHECK(r.base_lrs() == s.base_lrs());
  for (int i = 0; i < 5; ++i) {
    CHECK(u.opt.param_groups()[0].lr == t.opt.param_groups()[0].lr);
    CHECK(u.opt.param_groups()[1].lr == t.opt.param_groups()[1].lr);
    s.step();
    r.step();
  }
  // errors change nothing
  const int64_t e = r.last_epoch();
  const double lr = u.opt.param_groups()[0].lr;
  CHECK_THROWS_AS(r.load_state_dict({{"last_epoch", scalar_tensor(3, DType::f64)}}), Error);
  CHECK_THROWS_AS(r.load_state_dict({sd[0], {"base_lrs", from_vector(Vec{0.1}, {1}, DType::f64)}}),
                  Error);
  CHECK_THROWS_AS(r.load_state_dict({sd[0], sd[1], {"x", scalar_tensor(1)}}), Error);
  CHECK_THROWS_AS(r.load_state_dict({{"last_epoch", scalar_tensor(2.5, DType::f64)}, sd[1]}), Error);
  CHECK(r.last_epoch() == e);
  CHECK(u.opt.param_groups()[0].lr == lr);
  CHECK_THROWS_AS(optim::LinearWarmupDecay(u.opt, 10, 10), Error);
  CHECK_THROWS_AS(optim::StepLR(u.opt, 0), Error);
}

TEST_CASE("scheduler: drives the optimizer's step size") {
  // Plain SGD: each update is exactly lr * g, so the parameter's path shows the schedule.
  Tensor p = param({0.0});
  optim::SGD opt({p}, {.lr = 1.0});
  optim::LinearWarmupDecay s(opt, 2, 6);
  double want = 0;
  for (int e = 0; e < 6; ++e) {
    set_grad(p, {-1.0});
    opt.step();
    want += s.factor(e);
    s.step();
  }
  CHECK(vals(p)[0] == doctest::Approx(want));
  CHECK(want == doctest::Approx(0 + 0.5 + 1 + 0.75 + 0.5 + 0.25));
}

// ---------------------------------------------------------------- clipping
TEST_CASE("clip: clip_grad_norm_ returns the norm before clipping and scales the grads") {
  Tensor a = param({0, 0}), b = param({0});
  set_grad(a, {3, 4});
  set_grad(b, {-12});
  const double total = nn::clip_grad_norm_({a, b}, 6.5);
  CHECK(total == doctest::Approx(13));
  const double c = 6.5 / (13 + 1e-6);
  check_close(vals(a.grad()), {3 * c, 4 * c}, 0, 1e-14);
  check_close(vals(b.grad()), {-12 * c}, 0, 1e-14);
  // under the limit: unchanged
  set_grad(a, {3, 4});
  set_grad(b, {-12});
  CHECK(nn::clip_grad_norm_({a, b}, 100) == doctest::Approx(13));
  CHECK(vals(a.grad()) == Vec{3, 4});
  // other norms
  CHECK(nn::clip_grad_norm_({a, b}, 100, 1.0) == doctest::Approx(19));
  CHECK(nn::clip_grad_norm_({a, b}, 100, 3.0) == doctest::Approx(std::cbrt(27 + 64 + 1728)));
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(nn::clip_grad_norm_({a, b}, 6, inf) == doctest::Approx(12));
  check_close(vals(b.grad()), {-12 * 6 / (12 + 1e-6)}, 0, 1e-14);
  check_close(vals(a.grad()), {3 * 6 / (12 + 1e-6), 4 * 6 / (12 + 1e-6)}, 0, 1e-14);
  // float32 grads, and parameters without a grad are skipped
  Tensor f = param({0, 0, 0}, DType::f32), none = param({1});
  set_grad(f, {1, 2, 2});
  CHECK(nn::clip_grad_norm_({f, none}, 1.5) == doctest::Approx(3).epsilon(1e-6));
  check_close(vals(f.grad()), {0.5, 1, 1}, 1e-6, 1e-6);
  CHECK(nn::clip_grad_norm_({none}, 1.0) == 0.0);
  // non-finite norms
  set_grad(a, {inf, 1});
  CHECK_THROWS_AS(nn::clip_grad_norm_({a}, 1.0, 2.0, /*error_if_nonfinite=*/true), Error);
  CHECK(std::isinf(nn::clip_grad_norm_({a}, 1.0)));
  CHECK_THROWS_AS(nn::clip_grad_norm_({a}, -1.0), Error);
  CHECK_THROWS_AS(nn::clip_grad_norm_({a}, 1.0, 0.0), Error);
}

TEST_CASE("clip: clip_grad_value_ clamps every grad") {
  Tensor a = param({0, 0, 0, 0}), f = param({0, 0}, DType::f32), none = param({1});
  set_grad(a, {-3, -0.5, 0.25, 7});
  set_grad(f, {2, -2});
  nn::clip_grad_value_({a, f, none}, 1.0);
  CHECK(vals(a.grad()) == Vec{-1, -0.5, 0.25, 1});
  CHECK(vals(f.grad()) == Vec{1, -1});
  CHECK_FALSE(none.grad().defined());
  CHECK_THROWS_AS(nn::clip_grad_value_({a}, -1), Error);
}

// ---------------------------------------------------------------- gradient accumulation
TEST_CASE("gradient accumulation: two half-batch backwards equal one full-batch backward") {
  // y = x w^T + b, loss = mean((y - t)^2) over a batch of 8
  const Tensor x = from_vector(wave(8 * 4, 0.2), {8, 4}, DType::f64);
  const Tensor target = from_vector(wave(8 * 3, 1.7), {8, 3}, DType::f64);
  auto model = [] {
    Tensor w = from_vector(wave(12, 0.5, 0.3), {3, 4}, DType::f64);
    Tensor b = from_vector(wave(3, 0.9, 0.1), {3}, DType::f64);
    w.requires_grad_();
    b.requires_grad_();
    return std::vector<Tensor>{w, b};
  };
  auto loss = [](const std::vector<Tensor>& wb, const Tensor& xs, const Tensor& ts) {
    Tensor d = sub(linear(xs, wb[0], wb[1]), ts);
    return mean(mul(d, d));
  };
  std::vector<Tensor> full = model(), acc = model();
  loss(full, x, target).backward();
  for (int h = 0; h < 2; ++h)  // each half's mean, scaled by 1/2 (the number of micro-batches)
    mul(loss(acc, x.narrow(0, 4 * h, 4), target.narrow(0, 4 * h, 4)), 0.5).backward();
  for (int i = 0; i < 2; ++i) check_close(vals(acc[i].grad()), vals(full[i].grad()), 1e-14, 1e-12);

  // and one optimizer step on the accumulated grads equals the full-batch step
  optim::AdamW o_full(full, {.lr = 0.1}), o_acc(acc, {.lr = 0.1});
  o_full.step();
  o_acc.step();
  for (int i = 0; i < 2; ++i) check_close(vals(acc[i]), vals(full[i]), 1e-12, 1e-12);
}
