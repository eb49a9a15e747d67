// graft::ThreadContext (autograd/context.h): the guards and graft::compile save and restore every
// per-thread mode as one unit (also when an exception leaves the scope); autocast is decided by
// the autograd op, so AutocastGuard gives the same products in a compiled step as eagerly; and
// the precision is part of a compiled function's plan key.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/compile.h"
#include "autograd/context.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "ops/kernels.h"
#include "ops/random.h"

using namespace graft;

namespace {

// A two-layer MLP with its parameters as plain leaves; products of 64 x 96 x 128 multiply-adds
// (above autocast's 2^15 threshold).
struct Mlp {
  Tensor w1, b1, w2, b2;
  explicit Mlp(uint64_t seed) {
    Generator g(seed);
    auto leaf = [](Tensor t) { return t.requires_grad_(true); };
    w1 = leaf(randn({128, 96}, {}, &g) * 0.1);
    b1 = leaf(randn({128}, {}, &g) * 0.1);
    w2 = leaf(randn({48, 128}, {}, &g) * 0.1);
    b2 = leaf(randn({48}, {}, &g) * 0.1);
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  Tensor forward(const Tensor& x) const {
    Tensor h = tanh(linear(x, w1, b1));
    return matmul(h, w2.t()) + b2;  // matmul as well as linear
  }
};

// One step: zero the grads in place, the forward (under autocast `p` when `guard_inside`), the
// loss mean(y^2), backward. Returns {loss, y}.
StepFunction step_fn(const Mlp& m, bool guard_inside, Precision p) {
  return [&m, guard_inside, p](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    {
      NoGradGuard ng;
      for (const Tensor& t : m.params()) t.grad().zero_();
    }
    Tensor y;
    if (guard_inside) {
      AutocastGuard ac(p);
      y = m.forward(in[0]);
    } else {
      y = m.forward(in[0]);
    }
    Tensor loss = mean(y * y);
    loss.backward();
    return {loss, y};
  };
}

// Runs `f` eagerly with oneDNN off: graft's own kernels, the ones a default plan replays.
std::vector<Tensor> own_kernels(const StepFunction& f, const std::vector<Tensor>& in) {
  ContextGuard g;
  ops_context().onednn = false;
  std::vector<Tensor> out;
  for (const Tensor& t : f(in)) out.push_back(t.clone());
  return out;
}

// Gives every parameter a .grad, so that a plan sees a fixed state.
void make_grads(const Mlp& m) {
  Generator g(1);
  mean(m.forward(randn({64, 96}, {}, &g))).backward();
}

std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector<float>(); }

// max |a - b| / max |b|
double rel_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = values(a), y = values(b);
  REQUIRE(x.size() == y.size());
  double d = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    d = std::max(d, std::fabs(double(x[i]) - double(y[i])));
    s = std::max(s, std::fabs(double(y[i])));
  }
  return d / s;
}

// A context with every field moved off its default.
Generator g_context_gen;
void set_unusual_context() {
  OpsContext& o = ops_context();
  o.reference_kernels = true;
  o.onednn = false;
  o.last_generator = &g_context_gen;
  autograd_context().grad_enabled = false;
  autograd_context().autocast = Precision::bf16;
}

}  // namespace

TEST_CASE("context: a guard restores every field, on exceptions too") {
  const ThreadContext before = ThreadContext::current();
  CHECK(!before.autograd.tracer);
  CHECK(before.autograd.grad_enabled);
  CHECK(before.autograd.autocast == Precision::f32);
  try {
    NoGradGuard ng;
    set_unusual_context();  // every field, not just the guard's own
    AutocastGuard ac(Precision::f32);
    CHECK(!GradMode::is_enabled());
    CHECK(use_reference_kernels());
    throw std::runtime_error("leaves both scopes");
  } catch (const std::runtime_error&) {
  }
  CHECK(ThreadContext::current() == before);
  // nested guards each restore the context they found
  {
    AutocastGuard ac(Precision::bf16);
    {
      GradModeGuard off(false);
      ContextGuard any;
      ops_context().onednn = false;
      CHECK(autocast_enabled());
      CHECK(!GradMode::is_enabled());
    }
    CHECK(GradMode::is_enabled());
    CHECK(ops_context().onednn);
    CHECK(autocast_enabled());
  }
  CHECK(ThreadContext::current() == before);
}

TEST_CASE("context: a failing trace leaves the thread context as it found it") {
  Tensor x = randn({4, 4});
  auto bad = compile([](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    AutocastGuard ac(Precision::bf16);
    NoGradGuard ng;
    Tensor s = sum(in[0]);
    if (s.item<double>() > 0) return {s * 2.0};  // a data-dependent read: an error
    return {s};
  });
  {
    AutocastGuard ac(Precision::bf16);  // a caller's mode, kept across the failed call
    const ThreadContext before = ThreadContext::current();
    CHECK_THROWS_WITH_AS(bad({x}), doctest::Contains("data-dependent"), Error);
    CHECK(ThreadContext::current() == before);
    CHECK(!is_tracing());
    CHECK(cpu_backend_override() == nullptr);
  }
  CHECK(!autocast_enabled());
}

TEST_CASE("autocast: AutocastGuard in a compiled step gives eager's bf16 result, not f32") {
  Generator g(5);
  std::vector<Tensor> xs;
  for (int i = 0; i < 3; ++i) xs.push_back(randn({64, 96}, {}, &g));
  for (bool guard_inside : {true, false}) {
    CAPTURE(guard_inside);
    Mlp eager32(9), eager16(9), own16(9), traced(9);
    for (const Mlp* m : {&eager32, &eager16, &own16, &traced}) make_grads(*m);
    StepFunction e32 = step_fn(eager32, true, Precision::f32);
    StepFunction e16 = step_fn(eager16, true, Precision::bf16);
    StepFunction o16 = step_fn(own16, true, Precision::bf16);
    CompiledFunction c16 = compile(step_fn(traced, guard_inside, Precision::bf16), traced.params());
    for (size_t i = 0; i < xs.size(); ++i) {  // the trace, then replays
      CAPTURE(i);
      const Tensor y32 = e32({xs[i]})[1].clone(), y16 = e16({xs[i]})[1].clone();
      const std::vector<Tensor> own = own_kernels(o16, {xs[i]});
      std::vector<Tensor> out;
      {
        AutocastGuard ac(guard_inside ? Precision::f32 : Precision::bf16);  // around the call
        out = c16({xs[i]});
      }
      const Tensor& y = out[1];
      // the plan runs the same kernels as eager mode with oneDNN off: the same bits
      CHECK(values(y) == values(own[1]));
      CHECK(values(out[0]) == values(own[0]));
      CHECK(values(traced.w1.grad()) == values(own16.w1.grad()));
      // eager mode's default (oneDNN's bf16 primitive) within bf16 tolerance
      CHECK(rel_diff(y, y16) < 5e-3);
      CHECK(rel_diff(traced.w1.grad(), eager16.w1.grad()) < 2e-2);
      // ... and not the f32 result: bf16's 8-bit mantissa shows
      CHECK(rel_diff(y, y32) > 1e-4);
      CHECK(rel_diff(traced.w1.grad(), eager32.w1.grad()) > 1e-4);
      CHECK(rel_diff(traced.w2.grad(), eager32.w2.grad()) > 1e-4);
      CHECK(rel_diff(y, y32) < 3e-2);
    }
    CHECK(c16.traces() == 1);
    CHECK(c16.replays() == 2);
  }
}

TEST_CASE("compile: the plan key holds the precision: an f32 plan is not replayed under autocast") {
  Generator g(6);
  const Tensor x = randn({64, 96}, {}, &g);
  Mlp traced(9), own16(9);
  make_grads(traced);
  make_grads(own16);
  CompiledFunction step = compile(step_fn(traced, false, Precision::f32), traced.params());
  const Tensor y32 = step({x})[1].clone();
  CHECK(step.traces() == 1);
  CHECK(step.plan_for({x}) != nullptr);
  Tensor y16;
  {
    AutocastGuard ac(Precision::bf16);
    CHECK(step.plan_for({x}) == nullptr);  // the f32 plan does not apply here
    y16 = step({x})[1].clone();
    CHECK(step.traces() == 2);
    CHECK(step.plan_for({x}) != nullptr);
    const Tensor again = step({x})[1].clone();  // now a replay of the bf16 plan
    CHECK(step.replays() == 1);
    CHECK(values(again) == values(y16));
  }
  CHECK(step.num_plans() == 2);
  CHECK(rel_diff(y16, y32) > 1e-4);  // the second plan really computes in bf16
  CHECK(values(y16) == values(own_kernels(step_fn(own16, true, Precision::bf16), {x})[1]));
  // back in f32, the first plan replays
  const Tensor back = step({x})[1].clone();
  CHECK(step.traces() == 2);
  CHECK(step.replays() == 2);
  CHECK(values(back) == values(y32));
  // the plans' summaries name the bf16 products
  CHECK(step.plan_for({x})->summary().find("bf16") == std::string::npos);
  AutocastGuard ac(Precision::bf16);
  const trace::Graph* plan = step.plan_for({x});
  REQUIRE(plan != nullptr);
  CHECK(plan->summary().find("matmul bf16") != std::string::npos);
  CHECK(plan->summary().find("linear bf16") != std::string::npos);
}
