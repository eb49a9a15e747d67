// Optimisers: each update rule against the published algorithm, fused vs reference kernels,
// param groups, and bad input (state_dict, schedulers and clipping: test_optim_state.cpp).
//
// Expected values are hand-computed in this file: plain scalar double code following the
// algorithms published in PyTorch's documentation (torch.optim.SGD/Adam/AdamW/Adagrad), written independently
// of graft's kernels. No Python fixtures.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tests/nn/optim_fixture.h"

using namespace graft;
using namespace optim_test;
using graft::optim::ParamGroup;

namespace {

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

// Three steps of `make`'s optimizer (over one parameter of kN elements) against a fresh copy
// of `ref`, in f64 (to within f64_tol, absolute and relative) and in f32 (2e-6).
template <class Ref, class Make>
void check_three_steps(const Ref& ref, const Make& make, double f64_tol) {
  for (DType dt : {DType::f64, DType::f32}) {
    const std::string dts(dtype_name(dt));
    CAPTURE(dts);
    const double tol = dt == DType::f64 ? f64_tol : 2e-6;
    Ref r = ref;
    Vec p0 = rounded(wave(kN, 0.3), dt);
    Tensor p = param(p0, dt);
    std::unique_ptr<optim::Optimizer> opt = make(std::vector<Tensor>{p});
    for (int k = 0; k < 3; ++k) {
      const Vec g = rounded(wave(kN, 1.1 + k, 0.5 + k), dt);
      set_grad(p, g);
      opt->step();
      r.step(p0, g);
      check_close(vals(p), p0, tol, tol);
    }
    CHECK(opt->state(p)->step == 3);
  }
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
  for (const Cfg& c : cfgs) {
    CAPTURE(c.o.momentum);
    RefSGD ref{.lr = c.o.lr, .mu = c.o.momentum, .tau = c.o.dampening, .wd = c.o.weight_decay,
               .nesterov = c.o.nesterov};
    check_three_steps(ref, [&](std::vector<Tensor> ps) {
      return std::make_unique<optim::SGD>(ps, c.o);
    }, 1e-13);
  }
}

TEST_CASE("optim: Adam and AdamW match the published algorithm for 3 steps") {
  SUBCASE("Adam") {
    check_three_steps(RefAdam{.lr = 0.01}, [](std::vector<Tensor> ps) {
      return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 0.01});
    }, 1e-12);
  }
  SUBCASE("Adam with L2 weight decay and other betas") {
    RefAdam ref{.lr = 0.02, .b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .wd = 0.1};
    check_three_steps(ref, [](std::vector<Tensor> ps) {
      return std::make_unique<optim::Adam>(
          ps, optim::AdamOptions{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                                 .weight_decay = 0.1});
    }, 1e-12);
  }
  SUBCASE("AdamW (decoupled decay, PyTorch's default 0.01)") {
    check_three_steps(RefAdam{.lr = 0.01, .wd = 0.01, .decoupled = true}, [](std::vector<Tensor> ps) {
      return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01});
    }, 1e-12);
  }
  SUBCASE("AdamW with a large decay") {
    check_three_steps(RefAdam{.lr = 0.05, .wd = 0.5, .decoupled = true}, [](std::vector<Tensor> ps) {
      return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.5});
    }, 1e-12);
  }
}

TEST_CASE("optim: Adagrad matches the published algorithm for 3 steps") {
  check_three_steps(RefAdagrad{.lr = 0.1}, [](std::vector<Tensor> ps) {
    return std::make_unique<optim::Adagrad>(ps, optim::AdagradOptions{.lr = 0.1});
  }, 1e-12);
  RefAdagrad ref{.lr = 0.1, .eta = 0.5, .wd = 0.05, .init = 0.1, .eps = 1e-6};
  check_three_steps(ref, [](std::vector<Tensor> ps) {
    return std::make_unique<optim::Adagrad>(
        ps, optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.5, .weight_decay = 0.05,
                                  .initial_accumulator_value = 0.1, .eps = 1e-6});
  }, 1e-12);
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
  for (const char* name : {"encoder.layer.0.attention.output.dense.bias",
                           "encoder.layer.0.attention.output.LayerNorm.weight",
                           "embeddings.LayerNorm.bias", "h.0.ln_1.weight", "ln_f.weight",
                           "layers.1.norm2.weight", "self_attn.in_proj_bias",
                           "final_layer_norm.weight", "ln.weight"}) {
    CAPTURE(name);
    CHECK(optim::is_no_decay_name(name));
  }
  for (const char* name : {"encoder.layer.0.attention.output.dense.weight",
                           "embeddings.word_embeddings.weight", "lnk.weight", "kiln.weight"}) {
    CAPTURE(name);
    CHECK_FALSE(optim::is_no_decay_name(name));
  }

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
