// A new differentiable op, three ways, each checked against finite differences with gradcheck
// (float64): softplus(x) = log(1 + exp(x)), whose derivative is sigmoid(x).
//
//   build/examples/custom_op
//
//  1. composite: written with existing ops, `log(1 + exp(x))`. Autograd derives the backward
//     (and the double backward) from the ops it is made of. Simple, but exp(x) overflows for
//     large x: in float32, softplus(100) comes out inf.
//  2. custom node: a stable forward, max(x, 0) + log(1 + exp(-|x|)), computed without recording
//     (NoGradGuard), and a hand-written backward, dx = dy * sigmoid(x), attached with record()
//     and set_history() from autograd/node.h. This is how the library's own ops are written
//     (see autograd/ops_elementwise.cpp): the backward is made of differentiable ops, so
//     gradgradcheck (second derivatives) passes too.
//  3. fused: the same formula as a static expression graph (autograd/ct.h) turned into ONE tape
//     node by graft::fuse (autograd/fuse.h); the compiler derives its backward.
// Finally a deliberately wrong backward shows what a gradcheck failure reports.
// Exits 1 if any check that should pass fails (or the wrong backward slips through).
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graft.h"
#include "example_main.h"

using namespace graft;

// 1. composite: y = log(1 + exp(x))
Tensor softplus_composite(const Tensor& x) { return log(1.0 + exp(x)); }

// 2. a custom tape node. `scale` multiplies the backward: 1 is right; anything else is a bug
// that gradcheck must catch (used at the end of main).
Tensor softplus_node(const Tensor& x, double scale = 1.0) {
  Tensor y;
  {
    NoGradGuard no_grad;  // compute the value only: these ops leave no nodes behind
    y = maximum(x, zeros_like(x)) + log(1.0 + exp(-abs(x)));  // stable: exp never overflows
  }
  // record() returns a node only when grad mode is on and x requires grad. Its backward gets
  // the output gradient dy and returns one gradient per input (the engine accumulates them).
  if (auto node = record("softplus", {x}, [scale](BackwardCtx& c) -> std::vector<Tensor> {
        Tensor x = c.saved_tensor(0);
        return {c.grad() * sigmoid(x) * scale};  // dx = dy * sigmoid(x)
      })) {
    node->saved = {SavedTensor::input(x)};  // what backward needs (version-checked)
    set_history(y, node);                   // y.grad_fn() = node
  }
  return y;
}

// 3. fused: one forward loop and one backward loop over the elements (CPU, f32/f64).
ct::Var<0> xv;
auto softplus_fused = fuse(log(1.0 + exp(xv)), "softplus_fused");

int failures = 0;

void report(const std::string& what, const GradcheckResult& r, bool should_pass = true) {
  bool as_expected = r.ok == should_pass;
  fmt::print("{:<44} {}  max |analytical - numerical| = {:.2e}{}\n", what,
             r.ok ? "pass" : "FAIL", r.max_abs_err, as_expected ? "" : "   <-- unexpected");
  if (!r.ok) fmt::print("    {}\n", r.message);
  if (!as_expected) ++failures;
}

int run() {
  Generator gen(0);
  // gradcheck needs float64 inputs with requires_grad; [B, C] = [3, 4] values in [-3, 3].
  Tensor x = uniform({3, 4}, -3, 3, DType::f64, &gen).requires_grad_();

  fmt::print("-- the three versions agree on values and gradients\n");
  Tensor want = softplus_composite(x);
  for (const auto& [name, fn] : std::vector<std::pair<std::string, TensorFn>>{
           {"custom node", [](const std::vector<Tensor>& in) { return softplus_node(in[0]); }},
           {"fused", [](const std::vector<Tensor>& in) { return softplus_fused(in[0]); }}}) {
    Tensor y = fn({x});
    double dv = amax(abs(y - want)).item();
    Tensor gx = graft::grad({sum(y)}, {x})[0], gw = graft::grad({sum(softplus_composite(x))}, {x})[0];
    double dg = amax(abs(gx - gw)).item();
    fmt::print("{:<12} max |y - composite| = {:.1e}, max |dx - composite dx| = {:.1e}\n", name, dv,
               dg);
    if (dv > 1e-12 || dg > 1e-12) ++failures;
  }

  fmt::print("\n-- gradcheck (first derivatives) and gradgradcheck (second), float64\n");
  auto composite = [](const std::vector<Tensor>& in) { return softplus_composite(in[0]); };
  auto node = [](const std::vector<Tensor>& in) { return softplus_node(in[0]); };
  auto fused = [](const std::vector<Tensor>& in) { return softplus_fused(in[0]); };
  report("gradcheck(composite)", gradcheck(composite, {x}));
  report("gradgradcheck(composite)", gradgradcheck(composite, {x}));
  report("gradcheck(custom node)", gradcheck(node, {x}));
  report("gradgradcheck(custom node)", gradgradcheck(node, {x}));
  report("gradcheck(fused)", gradcheck(fused, {x}));
  // Broadcasting: gradcheck of a two-input use, softplus(a) * b with a [3, 1] and b [4].
  Tensor a = uniform({3, 1}, -2, 2, DType::f64, &gen).requires_grad_();
  Tensor b = uniform({4}, -2, 2, DType::f64, &gen).requires_grad_();
  report("gradcheck(custom node, broadcast a * b)",
         gradcheck([](const std::vector<Tensor>& in) { return softplus_node(in[0]) * in[1]; },
                   {a, b}));

  fmt::print("\n-- why the custom node: stability at large inputs (float32)\n");
  Tensor big = tensor({-100, 0, 100});
  fmt::print("composite  softplus([-100, 0, 100]) = {}\n", softplus_composite(big).str());
  fmt::print("node       softplus([-100, 0, 100]) = {}\n", softplus_node(big).str());
  std::vector<double> stable = softplus_node(big).to_vector<double>();
  if (!std::isfinite(stable[2]) || std::abs(stable[2] - 100) > 1e-4) ++failures;

  fmt::print("\n-- a wrong backward (dx = 0.5 dy sigmoid(x)) is caught:\n");
  report("gradcheck(node with a bug)",
         gradcheck([](const std::vector<Tensor>& in) { return softplus_node(in[0], 0.5); }, {x}),
         /*should_pass=*/false);

  return verdict(failures ? fmt::format("{} check(s) did not come out as expected", failures) : "",
                 "all three versions pass gradcheck; the buggy one does not", "\n");
}

int main() {
  return run_example("custom_op", [&] { return run(); });
}
