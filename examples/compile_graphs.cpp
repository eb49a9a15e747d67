// Compile-time graphs and traced steps: the two ways graft removes the tape's per-op cost.
//
//   build/examples/compile_graphs [--quick]
//
//  1. ct (autograd/ct.h): an expression over ct::Var placeholders is a value whose TYPE is the
//     graph; ct::value_and_grad differentiates it in reverse mode with no tape and no
//     allocation, ct::grad gives the derivative as a new expression type, printable.
//  2. fuse (autograd/fuse.h): the same kind of expression as ONE tape node over tensors, one
//     fused loop forward and one backward, instead of a node (and a buffer) per op.
//  3. compile (autograd/compile.h): a whole training step (forward, loss, backward) traced once
//     at the kernel level, optimised (dead code, elementwise fusion, buffer reuse in one arena)
//     and replayed with no heap allocation.
// Prints each result next to its eager/hand-computed counterpart and times both; exits 1 if
// any pair disagrees. --quick runs fewer timing repetitions.
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "autograd/compile.h"
#include "graft.h"
#include "example_main.h"

using namespace graft;

int failures = 0;
void check(bool ok, const std::string& what) {
  fmt::print("  {} {}\n", ok ? "ok:  " : "FAIL:", what);
  if (!ok) ++failures;
}

// Seconds per call of f, over `reps` calls (after one warm-up call).
template <class F> double time_per_call(int reps, F&& f) {
  f();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// The distinct tape nodes reachable from `node` (ops and the leaves' AccumulateGrad sinks).
int count_nodes(const std::shared_ptr<Node>& node, std::set<Node*>& seen) {
  if (!seen.insert(node.get()).second) return 0;
  int n = 1;
  for (const Edge& e : node->next_edges)
    if (e.node) n += count_nodes(e.node, seen);
  return n;
}
int count_nodes(const std::shared_ptr<Node>& node) {
  std::set<Node*> seen;
  return count_nodes(node, seen);
}

int run(int argc, char** argv) {
  const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
  const int reps = quick ? 3 : 20;

  fmt::print("-- 1. a static expression graph: f(x, y) = sin(x) y + exp(x / y)\n");
  ct::Var<0> x;
  ct::Var<1> y;
  auto f = sin(x) * y + exp(x / y);  // decltype(f) is Bin<Add, Bin<Mul, Un<Sin, Var<0>>, ...>>
  auto [v, dx, dy] = ct::value_and_grad(f, 1.5, 2.0);
  const double hx = std::cos(1.5) * 2.0 + std::exp(0.75) / 2.0;       // df/dx by hand
  const double hy = std::sin(1.5) - std::exp(0.75) * 1.5 / 4.0;       // df/dy by hand
  fmt::print("f(1.5, 2) = {:.6f}, df/dx = {:.6f}, df/dy = {:.6f}\n", v, dx, dy);
  fmt::print("df/dy as an expression: {}\n", ct::to_string(ct::grad(f, y)));
  check(std::abs(dx - hx) < 1e-12 && std::abs(dy - hy) < 1e-12, "value_and_grad = hand derivative");
  // The derivative of an expression without x is the TYPE ct::Zero: no code is generated for it.
  static_assert(std::is_same_v<decltype(ct::grad(ct::Const{2.0} * y, x)), ct::Zero>);

  fmt::print("\n-- 2. fuse: x sigmoid(x) tanh(y) as one tape node\n");
  auto gate = fuse(x * sigmoid(x) * tanh(y), "gate");
  auto eager_gate = [](const Tensor& a, const Tensor& b) { return a * sigmoid(a) * tanh(b); };
  Generator gen(0);
  for (int64_t n : {int64_t(64) * 64, int64_t(1) << 20}) {  // [N]: 4096 and 1M floats
    Tensor a = randn({n}, {}, &gen).requires_grad_(), b = randn({n}, {}, &gen).requires_grad_();
    Tensor fused = gate(a, b), composite = eager_gate(a, b);
    Tensor gf = graft::grad({sum(fused)}, {a})[0], ge = graft::grad({sum(composite)}, {a})[0];
    if (n == 64 * 64) {
      fmt::print("tape nodes: fused {} (gate + 2 leaves), eager {} (sigmoid, mul, tanh, mul + 2 "
                 "leaves)\n", count_nodes(fused.grad_fn()), count_nodes(composite.grad_fn()));
      check(amax(abs(fused - composite)).item() < 1e-6 && amax(abs(gf - ge)).item() < 1e-6,
            "fused values and gradients = eager ones (float32)");
    }
    const int r = n > 100000 ? reps : 40 * reps;
    double t_fused = time_per_call(r, [&] { sum(gate(a, b)).backward(); });
    double t_eager = time_per_call(r, [&] { sum(eager_gate(a, b)).backward(); });
    fmt::print("[{}] forward + backward: fused {:.1f} us, eager {:.1f} us\n", n, 1e6 * t_fused,
               1e6 * t_eager);
  }

  fmt::print("\n-- 3. compile: an MLP training step traced once, replayed after\n");
  manual_seed(0);
  nn::Sequential model(std::make_shared<nn::Linear>(16, 64), std::make_shared<nn::Tanh>(),
                       std::make_shared<nn::Linear>(64, 4));  // [B, 16] -> [B, 4]
  Generator data_gen(1);
  Tensor xb = randn({128, 16}, {}, &data_gen);  // B = 128
  Tensor yb = randint(0, 4, {128}, &data_gen);
  auto step_fn = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    Tensor loss = cross_entropy(model.forward(in[0]), in[1]);
    loss.backward();
    return {loss};
  };
  CompiledFunction step = compile(step_fn, model.parameters(), {.onednn = true});
  // .grad = None before every call (as optimizers' zero_grad does): the same signature each
  // time, and the plan re-attaches the gradients it computed after each replay
  auto compiled = [&] { model.zero_grad(); return step({xb, yb})[0].item(); };
  auto eager = [&] { model.zero_grad(); return step_fn({xb, yb})[0].item(); };
  const double traced = compiled();  // the first call traces (running the function eagerly)
  const double replayed = compiled();
  Tensor w_grad = model.parameters()[0].grad().clone();
  // the plan for this signature (inputs' shapes, dtypes and strides; state without .grad)
  model.zero_grad();
  fmt::print("{}", step.plan_for({xb, yb})->summary());
  const double eager_loss = eager();
  Tensor w_grad_eager = model.parameters()[0].grad();
  fmt::print("loss: traced {:.7f}, replayed {:.7f}, eager {:.7f}\n", traced, replayed, eager_loss);
  // replay runs graft's own matmul; eager uses oneDNN's: they differ by float32 rounding
  check(std::abs(replayed - eager_loss) < 1e-5 && amax(abs(w_grad - w_grad_eager)).item() < 1e-5,
        "replayed loss and gradients = eager ones");
  double t_replay = time_per_call(reps * 4, compiled);
  double t_step = time_per_call(reps * 4, eager);
  fmt::print("per step: replay {:.1f} us, eager {:.1f} us; {} trace(s), {} replays\n",
             1e6 * t_replay, 1e6 * t_step, step.traces(), step.replays());
  check(step.traces() == 1, "traced once");

  return verdict(failures ? fmt::format("{} check(s)", failures) : "");
}

int main(int argc, char** argv) {
  return run_example("compile_graphs", [&] { return run(argc, argv); });
}
