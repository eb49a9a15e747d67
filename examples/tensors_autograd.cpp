// Tensors and autograd, the first program to read: make tensors, broadcast them, record a
// computation on the tape, call backward() and read .grad; then NoGradGuard, detach, gradient
// accumulation, graft::grad (torch.autograd.grad) and double backward.
//
//   build/examples/tensors_autograd
//
// Every value it prints is small enough to check by hand; the program checks each one itself
// and exits 1 if any differs. The same computations in PyTorch, line for line:
//
//   a = torch.tensor([[1., 2., 3.], [4., 5., 6.]])          # [2, 3]
//   a.sum(0), a.sum(1), a.mean()                            # [5, 7, 9], [6, 15], 3.5
//   a + torch.tensor([10., 20., 30.])                       # [3] broadcast over rows
//   a * torch.tensor([[1.], [2.]])                          # [2, 1] broadcast over columns
//   x = torch.tensor([1., 2., 3.], requires_grad=True)
//   y = (x * x).sum(); y.backward(); x.grad                 # 14, [2, 4, 6]
//   W = a.clone().requires_grad_(); b = torch.tensor([1., 2., 3.], requires_grad=True)
//   (W * b).sum().backward(); W.grad, b.grad                # [[1, 2, 3], [1, 2, 3]], [5, 7, 9]
//   w = torch.tensor([1., -1.], requires_grad=True); xi = torch.tensor([2., 2.], requires_grad=True)
//   torch.sigmoid(w @ xi).backward(); w.grad, xi.grad       # [0.5, 0.5], [0.25, -0.25]
//   with torch.no_grad(): x -= 0.1 * x.grad                 # [0.8, 1.6, 2.4]
//   z = torch.tensor(2., requires_grad=True)
//   (g,) = torch.autograd.grad(z ** 3, z, create_graph=True)   # 12 = 3 z^2
//   (g2,) = torch.autograd.grad(g, z)                          # 12 = 6 z
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graft.h"
#include "example_main.h"

using namespace graft;

int failures = 0;

// Prints `what = t` and compares t's values with `want` (row-major).
void expect(const std::string& what, const Tensor& t, const std::vector<double>& want) {
  std::vector<double> got = t.to_vector<double>();
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = std::abs(got[i] - want[i]) < 1e-6;
  std::string text = t.str();
  if (t.dim() >= 2) {  // a matrix goes on the lines below its name
    for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos; at += 3) text.insert(at + 1, "  ");
    text = "\n  " + text;
  } else {
    text = " " + text;
  }
  fmt::print("{:<28} ={}{}\n", what, text, ok ? "" : "   <-- WRONG");
  if (!ok) ++failures;
}

// Prints the tape below `node`: each node's name, then the nodes its gradients flow to.
void print_tape(const std::shared_ptr<Node>& node, int depth = 1) {
  fmt::print("{:{}}{}\n", "", 2 * depth, node->name());
  for (const Edge& e : node->next_edges)
    if (e.node) print_tape(e.node, depth + 1);
}

int run() {
  fmt::print("-- tensors: a shared handle to (storage, shape, strides, dtype)\n");
  Tensor a = tensor({1, 2, 3, 4, 5, 6}).reshape({2, 3});  // [2, 3] float32
  expect("a", a, {1, 2, 3, 4, 5, 6});
  fmt::print("a.shape() = {}, a.dtype() = {}\n", a.shape(), dtype_name(a.dtype()));
  expect("a.t()  (a view, no copy)", a.t(), {1, 4, 2, 5, 3, 6});
  expect("sum(a, {0})", sum(a, {0}), {5, 7, 9});
  expect("sum(a, {1})", sum(a, {1}), {6, 15});
  expect("mean(a)", mean(a), {3.5});

  fmt::print("\n-- broadcasting (NumPy rules: align the trailing dims, stretch the 1s)\n");
  Tensor row = tensor({10, 20, 30});                         // [3]    -> [1, 3] -> [2, 3]
  Tensor col = tensor({1, 2}).reshape({2, 1});               // [2, 1] -> [2, 3]
  expect("a + row", a + row, {11, 22, 33, 14, 25, 36});
  expect("a * col", a * col, {1, 2, 3, 8, 10, 12});
  expect("matmul(a, [1, 0, -1])", matmul(a, tensor({1, 0, -1})), {-2, -2});  // [2, 3] @ [3]
  try {
    Tensor bad = a + tensor({1, 2});  // [2, 3] + [2]: trailing dims 3 and 2 do not match
  } catch (const Error& e) {
    fmt::print("a + [1, 2] raises graft::Error: {}\n", e.what());
  }

  fmt::print("\n-- the tape: ops on tensors that require grad record a Node each\n");
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = sum(x * x);
  expect("y = sum(x * x)", y, {14});
  fmt::print("y.grad_fn() records this graph (y at the top, the leaf x at the bottom):\n");
  print_tape(y.grad_fn());
  y.backward();  // dy/dx = 2x
  expect("x.grad()", x.grad(), {2, 4, 6});

  fmt::print("\n-- gradients of broadcast inputs are summed back to their shape\n");
  Tensor W = a.clone().requires_grad_();         // [2, 3]
  Tensor b = tensor({1, 2, 3}).requires_grad_();  // [3], used by both rows
  sum(W * b).backward();
  expect("W.grad() = b in every row", W.grad(), {1, 2, 3, 1, 2, 3});
  expect("b.grad() = sum of W's rows", b.grad(), {5, 7, 9});

  fmt::print("\n-- the chain rule through a nonlinearity: one sigmoid neuron\n");
  Tensor w = tensor({1, -1}).requires_grad_();
  Tensor xi = tensor({2, 2}).requires_grad_();
  Tensor out = sigmoid(matmul(w, xi));  // sigmoid(w . xi) = sigmoid(0) = 0.5
  out.backward();                       // d sigmoid(z)/dz = s (1 - s) = 0.25 at z = 0
  expect("sigmoid(w . xi)", out, {0.5});
  expect("w.grad() = 0.25 xi", w.grad(), {0.5, 0.5});
  expect("xi.grad() = 0.25 w", xi.grad(), {0.25, -0.25});

  fmt::print("\n-- .grad accumulates (+=) until you clear it, as in PyTorch\n");
  sum(x * x).backward();  // a second graph: x.grad becomes 2x + 2x
  expect("x.grad() after 2 backward", x.grad(), {4, 8, 12});
  x.set_grad(Tensor());  // like x.grad = None (optimizers' zero_grad does this)
  sum(x * x).backward();
  expect("x.grad() after clearing", x.grad(), {2, 4, 6});

  fmt::print("\n-- NoGradGuard: nothing is recorded (updates, evaluation)\n");
  {
    NoGradGuard no_grad;
    Tensor doubled = x * 2.0;
    fmt::print("under NoGradGuard, (x * 2).requires_grad() = {}\n", doubled.requires_grad());
    x.add_(x.grad(), -0.1);  // an SGD step, x -= 0.1 x.grad; in-place ops need the guard
  }
  expect("x after x -= 0.1 x.grad", x, {0.8, 1.6, 2.4});
  Tensor d = x.detach();  // the same data, cut from the graph
  fmt::print("x.detach().requires_grad() = {}, x.is_leaf() = {}, y.is_leaf() = {}\n",
             d.requires_grad(), x.is_leaf(), y.is_leaf());

  fmt::print("\n-- graft::grad (torch.autograd.grad) and double backward\n");
  Tensor z = scalar_tensor(2.0, DType::f64).requires_grad_();
  Tensor g = graft::grad({pow(z, 3.0)}, {z}, {}, false, /*create_graph=*/true)[0];
  expect("d(z^3)/dz = 3 z^2 at z = 2", g, {12});
  Tensor g2 = graft::grad({g}, {z})[0];  // g is itself on the tape, so it can be differentiated
  expect("d2(z^3)/dz2 = 6 z", g2, {12});
  fmt::print("z.grad() is still undefined: {} (graft::grad does not touch .grad)\n",
             !z.grad().defined());

  return verdict(failures ? fmt::format("{} value(s) differ from the hand-computed ones", failures) : "",
                 "every value matches the hand-computed one", "\n");
}

int main() {
  return run_example("tensors_autograd", [&] { return run(); });
}
