// Optimiser state_dict round trips, LR schedulers, gradient clipping and accumulation.
//
// Expected values are hand-computed in this file (the schedules' closed forms, the clipping
// formulas), written independently of graft's kernels. No Python fixtures.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "tests/nn/optim_fixture.h"

using namespace graft;
using namespace optim_test;
using graft::optim::ParamGroup;

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
