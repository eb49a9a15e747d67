// graft::compile (traced step graphs): replays equal eager execution (bit-identical: the same
// kernels run in the same order), replay performs no heap allocation (malloc is counted),
// new shapes trace new plans, the passes (dead code, fusion, in-place, arena) do what they
// claim, data-dependent host code and bad inputs raise graft::Error, dropout re-draws per replay.
#include <doctest/doctest.h>

#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "autograd/attention.h"
#include "autograd/compile.h"
#include "autograd/conv.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "ops/random.h"

// ---------------------------------------------------------------- a counting malloc
// The binary's malloc family counts calls while `g_counting` is set and forwards to glibc.
// (Not under AddressSanitizer, which owns malloc; the zero-allocation test is skipped there.)
#if defined(__SANITIZE_ADDRESS__)
#define GRAFT_COUNT_ALLOCS 0
#else
#define GRAFT_COUNT_ALLOCS 1
namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
void* g_where[64][12];
inline void count() {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  long n = g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (n < 64 && std::getenv("GRAFT_DEBUG_ALLOCS")) backtrace(g_where[n], 12);
}
}  // namespace
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  count();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  count();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  count();
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  count();
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;  // ENOMEM
}
}
#endif

using namespace graft;

namespace {

std::shared_ptr<nn::Sequential> mlp(uint64_t seed, int64_t in, int64_t hidden, int64_t out) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(hidden, hidden), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(hidden, out));
}

struct Batch {
  Tensor x, y;
};
Batch batch(uint64_t seed, int64_t B, int64_t in, int64_t classes) {
  Generator g(seed);
  return {randn({B, in}, {}, &g), randint(0, classes, {B}, &g)};
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// Runs one eager backward so that every parameter has a .grad (plans then see a fixed state).
void make_grads(nn::Module& m, int64_t in, int64_t classes) {
  Batch b = batch(999, 4, in, classes);
  cross_entropy(m.forward(b.x), b.y).backward();
}

// A 4-8-3 MLP from `seed` with grads, and its compiled train step, traced once on batch b.
struct TracedMlp {
  std::shared_ptr<nn::Sequential> model;
  CompiledFunction step;
  Batch b;
};
TracedMlp traced_mlp(uint64_t seed) {
  auto model = mlp(seed, 4, 8, 3);
  make_grads(*model, 4, 3);
  TracedMlp t{model, compile(nn::cross_entropy_step(*model), model->parameters()), batch(1, 5, 4, 3)};
  t.step({t.b.x, t.b.y});
  return t;
}

// Runs eager matmuls on graft's own kernel, as a default plan does, so that "the same
// kernels" holds: a 32x32x32 product reaches oneDNN's size threshold in eager mode, and oneDNN
// agrees with the own kernel to the bit only in some builds (release yes, -O2 + ASan no).
struct OwnMatmulScope {
  bool prev = cpu::use_onednn();
  OwnMatmulScope() { cpu::set_use_onednn(false); }
  ~OwnMatmulScope() { cpu::set_use_onednn(prev); }
};

}  // namespace

TEST_CASE("compile: MLP training step equals eager, bit for bit, over several replays") {
  OwnMatmulScope own_matmul;
  auto eager = mlp(1, 8, 32, 5), traced = mlp(1, 8, 32, 5);
  StepFunction step_eager = nn::cross_entropy_step(*eager);
  CompiledFunction step = compile(nn::cross_entropy_step(*traced), traced->parameters());
  auto pe = eager->parameters(), pt = traced->parameters();
  for (int it = 0; it < 5; ++it) {
    Batch b = batch(100 + it, 32, 8, 5);  // new values every call, same shapes
    const Tensor le = step_eager({b.x, b.y})[0];
    const Tensor lt = step({b.x, b.y})[0];
    INFO("call " << it);
    CHECK(values(lt) == values(le));
    for (size_t i = 0; i < pe.size(); ++i) {
      REQUIRE(pt[i].grad().defined());
      CHECK(values(pt[i].grad()) == values(pe[i].grad()));
    }
    // an optimiser-like update outside the traced step, identical on both models
    NoGradGuard ng;
    for (size_t i = 0; i < pe.size(); ++i) {
      pe[i].add_(pe[i].grad(), -0.1);
      pt[i].add_(pt[i].grad(), -0.1);
    }
  }
  // Call 1 traced with no .grad yet (the plan creates them); call 2 saw the grads and traced
  // the steady-state plan; calls 3-5 replayed it.
  CHECK(step.traces() == 2);
  CHECK(step.replays() == 3);
}

TEST_CASE("compile: grads dropped with set_to_none are re-attached by the replay") {
  OwnMatmulScope own_matmul;
  auto eager = mlp(2, 6, 16, 3), traced = mlp(2, 6, 16, 3);
  StepFunction step_eager = nn::cross_entropy_step(*eager);
  CompiledFunction step = compile(nn::cross_entropy_step(*traced), traced->parameters());
  for (int it = 0; it < 4; ++it) {
    eager->zero_grad();
    traced->zero_grad();  // drops every .grad, as nn::Trainer does each step
    Batch b = batch(200 + it, 16, 6, 3);
    CHECK(values(step({b.x, b.y})[0]) == values(step_eager({b.x, b.y})[0]));
    const auto pe = eager->parameters(), pt = traced->parameters();
    for (size_t i = 0; i < pe.size(); ++i) {
      REQUIRE(pt[i].grad().defined());
      CHECK(values(pt[i].grad()) == values(pe[i].grad()));
    }
  }
  CHECK(step.traces() == 1);
  CHECK(step.replays() == 3);
}

TEST_CASE("compile: replay performs zero heap allocations") {
#if GRAFT_COUNT_ALLOCS
  // Sizes large enough for the oneDNN matmul path and OpenMP-parallel kernels.
  auto model = mlp(3, 64, 128, 10);
  make_grads(*model, 64, 10);
  CompiledFunction step = compile(nn::cross_entropy_step(*model), model->parameters());
  Batch b1 = batch(1, 32, 64, 10), b2 = batch(2, 32, 64, 10);
  step({b1.x, b1.y});  // trace
  step({b2.x, b2.y});  // replay once (warms per-thread caches)
  REQUIRE(step.traces() == 1);
  const std::vector<Tensor> in1{b1.x, b1.y}, in2{b2.x, b2.y};
  if (std::getenv("GRAFT_DEBUG_ALLOCS")) backtrace(g_where[0], 12);  // loads libgcc first
  g_allocs = 0;
  g_counting = true;
  for (int i = 0; i < 3; ++i) step(i % 2 ? in1 : in2);
  g_counting = false;
  CHECK(g_allocs.load() == 0);
  if (std::getenv("GRAFT_DEBUG_ALLOCS"))
    for (long i = 0; i < std::min(g_allocs.load(), 64L); ++i) {
      backtrace_symbols_fd(g_where[i], 12, 2);
      write(2, "--\n", 3);
    }
  CHECK(step.replays() == 4);
  // the counter does count: an eager step allocates
  g_allocs = 0;
  g_counting = true;
  { nn::cross_entropy_step(*model)(in1); }
  g_counting = false;
  CHECK(g_allocs.load() > 0);
#else
  MESSAGE("allocation counting is off under AddressSanitizer");
#endif
}

TEST_CASE("compile: with oneDNN-sized matmuls, replay is within 1e-6 of eager (or exact with onednn)") {
  // 32 x 64 x 128 products take oneDNN in eager mode; a default plan runs graft's own kernel.
  auto eager = mlp(11, 64, 128, 10), own = mlp(11, 64, 128, 10), dnnl = mlp(11, 64, 128, 10);
  for (auto* m : {eager.get(), own.get(), dnnl.get()}) make_grads(*m, 64, 10);
  StepFunction se = nn::cross_entropy_step(*eager);
  CompiledFunction so = compile(nn::cross_entropy_step(*own), own->parameters());
  CompiledFunction sd = compile(nn::cross_entropy_step(*dnnl), dnnl->parameters(), {.onednn = true});
  for (int it = 0; it < 3; ++it) {
    Batch b = batch(300 + it, 32, 64, 10);
    const std::vector<float> le = values(se({b.x, b.y})[0]);
    const std::vector<float> lo = values(so({b.x, b.y})[0]);
    CHECK(values(sd({b.x, b.y})[0]) == le);  // the same kernels: bit for bit
    CHECK(lo[0] == doctest::Approx(le[0]).epsilon(1e-6));
    const auto pe = eager->parameters(), po = own->parameters(), pd = dnnl->parameters();
    for (size_t i = 0; i < pe.size(); ++i) {
      const std::vector<float> ge = values(pe[i].grad()), go = values(po[i].grad());
      CHECK(values(pd[i].grad()) == ge);
      double worst = 0, scale = 0;
      for (size_t k = 0; k < ge.size(); ++k) {
        worst = std::max(worst, double(std::abs(ge[k] - go[k])));
        scale = std::max(scale, double(std::abs(ge[k])));
      }
      CHECK(worst <= 1e-6 * scale);  // relative to the gradient's largest entry
    }
  }
  CHECK(so.replays() == 2);
  CHECK(sd.replays() == 2);
}

TEST_CASE("compile: tensors kept alive by the function, and nested compiles, are errors") {
  Tensor w = randn({3}, TensorOptions().requires_grad(true));
  std::vector<Tensor> cache;
  auto keeps = compile(
      [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
        cache.push_back(exp(in[0]));  // alive after the call, not returned
        return {sum(in[0])};
      });
  CHECK_THROWS_WITH_AS(keeps({w.detach()}), doctest::Contains("alive"), Error);
  cache.clear();
  auto inner = std::make_shared<CompiledFunction>(compile(
      [](const std::vector<Tensor>& in) -> std::vector<Tensor> { return {in[0] * 2.0}; }));
  auto outer = compile([&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    return {(*inner)(in)[0] + 1.0};
  });
  CHECK_THROWS_WITH_AS(outer({w.detach()}), doctest::Contains("while tracing"), Error);
}

TEST_CASE("compile: a new input shape traces and caches a new plan") {
  auto model = mlp(4, 5, 8, 3);
  make_grads(*model, 5, 3);
  CompiledFunction step = compile(nn::cross_entropy_step(*model), model->parameters());
  Batch small = batch(1, 8, 5, 3), big = batch(2, 16, 5, 3);
  step({small.x, small.y});
  step({small.x, small.y});
  CHECK(step.traces() == 1);
  CHECK(step.plan_for({big.x, big.y}) == nullptr);
  step({big.x, big.y});
  CHECK(step.traces() == 2);
  CHECK(step.num_plans() == 2);
  step({small.x, small.y});
  step({big.x, big.y});
  CHECK(step.traces() == 2);
  CHECK(step.replays() == 3);
  CHECK(step.plan_for({big.x, big.y}) != nullptr);
}

TEST_CASE("compile: dead-code elimination removes an unused branch") {
  Tensor x = randn({4, 6});
  auto fn = [](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor unused = exp(in[0]) * 3.0;  // never read, never returned
    (void)unused;
    return {sum(tanh(in[0]))};
  };
  CompiledFunction on = compile(fn), off = compile(fn, {}, {.dce = false});
  on({x});
  off({x});
  const trace::Graph* g = on.plan_for({x});
  REQUIRE(g);
  CHECK(g->stats.dead == 2);  // exp and mul_scalar
  CHECK(off.plan_for({x})->stats.dead == 0);
  bool exp_dead = false;
  for (const trace::Op& op : g->ops)
    if (op.label == "unary exp") exp_dead = op.dead;
  CHECK(exp_dead);
  Tensor y = randn({4, 6});
  CHECK(values(on({y})[0]) == values(sum(tanh(y))));
}

TEST_CASE("compile: elementwise fusion forms tile groups and stays exact") {
  // tiles of 1 KB: 256 floats, so 4096 elements make 16 tiles
  const std::vector<std::pair<const char*, CompileOptions>> variants = {
      {"fused, in place", {.tile_bytes = 1024}},
      {"fused, no in-place", {.in_place = false, .tile_bytes = 1024}},
      {"not fused", {.fuse = false, .tile_bytes = 1024}}};
  for (const auto& [what, options] : variants) {
    INFO(std::string(what));
    Generator g(5);
    Tensor p = randn({4096}, TensorOptions().requires_grad(true), &g);
    Tensor q = p.detach().clone().requires_grad_(true);
    auto chain = [](const Tensor& w, const Tensor& x) {
      return sum(sigmoid(tanh(w * x) + 1.0) * x);  // elementwise forward and backward chains
    };
    auto fn = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
      Tensor l = chain(p, in[0]);
      l.backward();
      return {l};
    };
    CompiledFunction step = compile(fn, {p}, options);
    for (int it = 0; it < 4; ++it) {
      Tensor x = randn({4096}, {}, &g);
      if (p.grad().defined()) {
        NoGradGuard ng;
        p.grad().zero_();
        q.grad().zero_();
      }
      const Tensor l = step({x})[0];
      Tensor le = chain(q, x);
      le.backward();
      INFO("call " << it);
      CHECK(values(l) == values(le));
      CHECK(values(p.grad()) == values(q.grad()));
    }
    const trace::Graph* gr = step.plan_for({randn({4096})});
    REQUIRE(gr);
    if (options.fuse) {
      CHECK(gr->stats.fused_groups >= 1);
      CHECK(gr->stats.fused_ops >= 4);
      for (const trace::Group& grp : gr->groups) {
        CHECK(grp.ops.size() >= 2);
        CHECK(grp.tile == 256);
      }
      const std::string dot = gr->to_dot();
      CHECK(dot.find("cluster_group0") != std::string::npos);
      CHECK(dot.find("fused group 0") != std::string::npos);
    } else {
      CHECK(gr->stats.fused_groups == 0);
    }
    CHECK((gr->stats.in_place >= 1) == options.in_place);
  }
}

TEST_CASE("compile: the arena is smaller than the intermediates it holds") {
  auto model = mlp(6, 16, 64, 4);
  make_grads(*model, 16, 4);
  Batch b = batch(3, 32, 16, 4);
  CompiledFunction reuse = compile(nn::cross_entropy_step(*model), model->parameters());
  CompiledFunction no_reuse =
      compile(nn::cross_entropy_step(*model), model->parameters(), {.in_place = false, .reuse = false});
  reuse({b.x, b.y});
  no_reuse({b.x, b.y});
  const trace::GraphStats& s = reuse.plan_for({b.x, b.y})->stats;
  const trace::GraphStats& n = no_reuse.plan_for({b.x, b.y})->stats;
  CHECK(s.intermediate_bytes > 0);
  CHECK(s.arena_bytes < s.intermediate_bytes);
  CHECK(n.arena_bytes >= n.intermediate_bytes);  // without reuse every buffer has its own bytes
  CHECK(s.intermediate_bytes == n.intermediate_bytes);
  // both plans compute the same step
  CHECK(values(reuse({b.x, b.y})[0]) == values(no_reuse({b.x, b.y})[0]));
}

TEST_CASE("compile: data-dependent host reads raise graft::Error") {
  Tensor x = randn({3, 3});
  auto branch = compile([](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor s = sum(in[0]);
    if (s.item<double>() > 0) return {s * 2.0};  // a host decision on a computed value
    return {s};
  });
  CHECK_THROWS_WITH_AS(branch({x}), doctest::Contains("data-dependent"), Error);
  CHECK(branch.num_plans() == 0);
  auto read_input = compile([](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    const double v = in[0].to_vector<double>()[0];  // a float input's value, frozen otherwise
    return {in[0] * v};
  });
  CHECK_THROWS_WITH_AS(read_input({x}), doctest::Contains("data-dependent"), Error);
  // tracing left no hooks behind: eager code works as usual
  CHECK(sum(x).item<double>() == doctest::Approx(sum(x).item<double>()));
  CHECK_FALSE(is_tracing());
}

TEST_CASE("compile: dropout draws a fresh mask per replay, like eager") {
  Tensor x = ones({64, 32});
  CompiledFunction drop = compile([](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    return {dropout(in[0], 0.5)};
  });
  drop({x});  // trace
  manual_seed(7);
  const std::vector<float> r1 = values(drop({x})[0]);
  const std::vector<float> r2 = values(drop({x})[0]);
  CHECK(r1 != r2);  // a new mask on every replay
  manual_seed(7);
  const std::vector<float> e1 = values(dropout(x, 0.5));
  const std::vector<float> e2 = values(dropout(x, 0.5));
  CHECK(r1 == e1);  // the same generator state gives the eager mask
  CHECK(r2 == e2);
  CHECK(drop.replays() == 2);
}

TEST_CASE("compile: cross_entropy re-counts ignored targets on every call") {
  auto eager = mlp(8, 4, 8, 3), traced = mlp(8, 4, 8, 3);
  make_grads(*eager, 4, 3);
  make_grads(*traced, 4, 3);
  StepFunction se = nn::cross_entropy_step(*eager);
  CompiledFunction st = compile(nn::cross_entropy_step(*traced), traced->parameters());
  Tensor x = randn({6, 4});
  const std::vector<std::vector<int64_t>> targets = {
      {0, 1, 2, 0, 1, 2}, {0, -100, 2, 0, 1, 2}, {1, 1, 0, 2, 2, 0}, {-100, -100, 2, 0, 1, 2}};
  for (const auto& t : targets) {
    Tensor y = from_vector(t, {6});
    CHECK(values(st({x, y})[0]) == values(se({x, y})[0]));
  }
  CHECK(st.traces() == 3);  // 0, 1 and 2 ignored targets: three plans
  CHECK(st.replays() == 1);
}

TEST_CASE("compile: to_dot shows forward and backward kernels with shapes") {
  TracedMlp t = traced_mlp(9);
  CompiledFunction& step = t.step;
  const Batch& b = t.b;
  const std::string dot = step.plan_for({b.x, b.y})->to_dot();
  const std::string hidden = std::string(dtype_name(DType::f32)) + "[5, 8]";  // [B, C] activations
  for (const std::string& want : {std::string("digraph"), std::string("cluster_forward"),
                                  std::string("cluster_backward"), std::string("linear"),
                                  std::string("cross_entropy_backward"),
                                  std::string("unary_backward tanh"), hidden,
                                  std::string("input 0"), std::string("output 0")}) {
    INFO(want);
    CHECK(dot.find(want) != std::string::npos);
  }
  const std::string text = step.plan_for({b.x, b.y})->summary();
  CHECK(text.find("kernels recorded") != std::string::npos);
}

TEST_CASE("compile: bad inputs and untraceable functions raise graft::Error") {
  TracedMlp t = traced_mlp(10);
  CompiledFunction& step = t.step;
  const Batch& b = t.b;
  CHECK_THROWS_WITH_AS(step({b.x}), doctest::Contains("takes 2 inputs"), Error);
  CHECK_THROWS_WITH_AS(step({b.x.to(DType::f64), b.y}), doctest::Contains("dtype"), Error);
  CHECK_THROWS_WITH_AS(step({Tensor(), b.y}), doctest::Contains("undefined"), Error);
  // a parameter not declared as state
  CompiledFunction undeclared = compile(nn::cross_entropy_step(*t.model));
  CHECK_THROWS_WITH_AS(undeclared({b.x, b.y}), doctest::Contains("neither an input"), Error);
  // returning an input
  CompiledFunction ident = compile([](const std::vector<Tensor>& in) { return in; });
  CHECK_THROWS_WITH_AS(ident({b.x}), doctest::Contains("an input"), Error);
  CHECK_THROWS_AS(compile(StepFunction()), Error);
}

TEST_CASE("compile: conv1d, pooling and fused attention steps trace and replay like eager") {
  OwnMatmulScope own_matmul;
  // A step over every kernel family added after the recorder: conv1d (+ both backward
  // halves), max and avg pooling (+ backward), fused attention (+ backward).
  Generator g(7);
  Tensor w = randn({6, 4, 3}, {}, &g).requires_grad_(), bias = randn({6}, {}, &g).requires_grad_();
  Tensor wq = randn({6, 6}, {}, &g).requires_grad_();
  auto fn = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor h = tanh(conv1d(in[0], w, bias, 1, 1));          // [B, 6, L]
    Tensor p = max_pool1d(h, 2) + avg_pool1d(h, 2);          // [B, 6, L/2]
    Tensor q = matmul(p.transpose(1, 2), wq).unsqueeze(1);   // [B, 1, L/2, 6]
    Tensor a = scaled_dot_product_attention(q, q, q, {}, 0.0, true);
    Tensor loss = mean(a * a);
    loss.backward();
    return {loss};
  };
  const std::vector<Tensor> state = {w, bias, wq};
  auto run_eager = [&](const Tensor& x) {
    for (auto t : state) t.set_grad({});
    Tensor l = fn({x})[0];
    std::vector<std::vector<float>> r = {values(l)};
    for (auto& t : state) r.push_back(values(t.grad()));
    return r;
  };
  CompiledFunction step = compile(fn, state);
  for (int it = 0; it < 4; ++it) {
    Tensor x = randn({3, 4, 10}, {}, &g);
    const auto expected = run_eager(x);
    for (auto t : state) t.set_grad({});
    const Tensor l = step({x})[0];
    INFO("call " << it);
    CHECK(values(l) == expected[0]);
    for (size_t i = 0; i < state.size(); ++i) CHECK(values(state[i].grad()) == expected[i + 1]);
  }
  CHECK(step.replays() >= 2);
  // (attention with dropout: tests/autograd/test_compile_models.cpp)
}
