// Static expression graphs vs the tape.
//  ct_scalar: gradient evaluations/s of a 20-op scalar function of two variables: graft::ct
//             reverse mode vs the tape (0-dim float64 tensors) vs a hand-written derivative.
//  ct_fused:  LSTM-cell output math h = sigmoid(o) tanh(sigmoid(f) c + sigmoid(i) tanh(g)) on
//             [B=32, 256] per gate (4x256 gate columns): one fused node vs the same math as tape
//             ops, forward + backward.
//  ct_fused_lstm_cell_op: the whole LSTM cell update (c and h from gates [32, 4*256] and
//             c_prev) as the two-output fused node lstm_cell_fused (autograd/ops_rnn.h) vs the
//             same math as tape ops on chunk views (the composite path of nn::LSTM); forward +
//             backward of both outputs.
// JSON lines: name, value, unit, reference, ratio.
#include <chrono>
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <omp.h>

#include "autograd/ct.h"
#include "autograd/fuse.h"
#include "autograd/ops_rnn.h"
#include "bench/timing.h"

using namespace graft;

namespace {
volatile double sink;

// 20 ops: f = sin(x) y + exp(x/y) - tanh(x y) + log(x^2 + 1) * sqrt(y) + sigmoid(x - y) * cos(y)
double hand(double x, double y, double& dx, double& dy) {
  double s = std::sin(x), e = std::exp(x / y), t = std::tanh(x * y), l = std::log(x * x + 1),
         q = std::sqrt(y), sg = 1 / (1 + std::exp(-(x - y))), c = std::cos(y);
  double f = s * y + e - t + l * q + sg * c;
  double dt = 1 - t * t, dsg = sg * (1 - sg);
  dx = std::cos(x) * y + e / y - dt * y + 2 * x / (x * x + 1) * q + dsg * c;
  dy = s - e * x / (y * y) - dt * x + l * 0.5 / q - dsg * c - sg * std::sin(y);
  return f;
}
}  // namespace

int main() {
  ct::Var<0> x;
  ct::Var<1> y;
  auto f = sin(x) * y + exp(x / y) - tanh(x * y) + log(pow(x, 2.0) + 1.0) * sqrt(y) + sigmoid(x - y) * cos(y);
  volatile double va = 0.7, vb = 1.3;  // read every iteration: nothing is hoisted out of the loop
  double a = va, b = vb;
  double r_ct = bench::per_second([&] {
    auto [v, dx, dy] = ct::value_and_grad(f, double(va), double(vb));
    sink = v + dx + dy;
  });
  double r_hand = bench::per_second([&] {
    double dx, dy;
    double v = hand(va, vb, dx, dy);
    sink = v + dx + dy;
  });
  Tensor ta = scalar_tensor(a, TensorOptions(DType::f64).requires_grad());
  Tensor tb = scalar_tensor(b, TensorOptions(DType::f64).requires_grad());
  double r_tape = bench::per_second([&] {
    Tensor v = sin(ta) * tb + exp(ta / tb) - tanh(ta * tb) + log(square(ta) + 1.0) * sqrt(tb) +
               sigmoid(ta - tb) * cos(tb);
    auto g = grad({v}, {ta, tb});
    sink = g[0].item();
  });
  auto [v0, dx0, dy0] = ct::value_and_grad(f, a, b);
  double hx, hy;
  hand(a, b, hx, hy);
  int threads = omp_get_max_threads();
  fmt::print("{{\"name\": \"ct_scalar_vs_hand\", \"value\": {:.0f}, \"unit\": \"grad evals/s\", \"reference\": {:.0f}, \"ratio\": {:.3f}, \"threads\": {}, \"check_abs_diff\": {:.2e}}}\n",
             r_ct, r_hand, r_ct / r_hand, threads, std::abs(dx0 - hx) + std::abs(dy0 - hy));
  fmt::print("{{\"name\": \"ct_scalar_vs_tape\", \"value\": {:.0f}, \"unit\": \"grad evals/s\", \"reference\": {:.0f}, \"ratio\": {:.1f}, \"threads\": {}}}\n",
             r_ct, r_tape, r_ct / r_tape, threads);
  (void)v0;

  // ---- ct_fused: LSTM cell output
  ct::Var<0> i;
  ct::Var<1> fg;
  ct::Var<2> g;
  ct::Var<3> o;
  ct::Var<4> c;
  auto cell = fuse(sigmoid(o) * tanh(sigmoid(fg) * c + sigmoid(i) * tanh(g)), "lstm_cell_h");
  manual_seed(0);
  Tensor gates = randn({32, 4 * 256}, TensorOptions().requires_grad());
  Tensor cprev = randn({32, 256}, TensorOptions().requires_grad());
  auto parts = [&] { return chunk(gates, 4, 1); };
  double r_fused = bench::per_second([&] {
    auto p = parts();
    Tensor h = cell(p[0], p[1], p[2], p[3], cprev);
    sum(h).backward();
  });
  double r_ops = bench::per_second([&] {
    auto p = parts();
    Tensor h = sigmoid(p[3]) * tanh(sigmoid(p[1]) * cprev + sigmoid(p[0]) * tanh(p[2]));
    sum(h).backward();
  });
  fmt::print("{{\"name\": \"ct_fused_lstm_cell\", \"value\": {:.0f}, \"unit\": \"fwd+bwd/s\", \"reference\": {:.0f}, \"reference_source\": \"same math as tape ops\", \"ratio\": {:.2f}, \"threads\": {}}}\n",
             r_fused, r_ops, r_fused / r_ops, threads);

  // ---- ct_fused_lstm_cell_op: both outputs, one gate-gradient buffer
  Tensor dh = randn({32, 256}), dc = randn({32, 256});
  // alternating rounds, best of each: fairer on a machine whose load changes during the run
  double r_cell = 0, r_comp = 0;
  for (int round = 0; round < 3; ++round) {
    r_cell = std::max(r_cell, bench::per_second([&] {
      auto [h, c] = lstm_cell_fused(gates, cprev);
      auto gr = grad({h, c}, {gates, cprev}, {dh, dc});
      sink = gr[0].numel();
    }, 0.3));
    r_comp = std::max(r_comp, bench::per_second([&] {
      auto p = chunk(gates, 4, 1);
      Tensor c = sigmoid(p[1]) * cprev + sigmoid(p[0]) * tanh(p[2]);
      Tensor h = sigmoid(p[3]) * tanh(c);
      auto gr = grad({h, c}, {gates, cprev}, {dh, dc});
      sink = gr[0].numel();
    }, 0.3));
  }
  fmt::print("{{\"name\": \"ct_fused_lstm_cell_op\", \"value\": {:.0f}, \"unit\": \"fwd+bwd/s\", \"reference\": {:.0f}, \"reference_source\": \"composite tape ops (chunk, sigmoid, tanh, mul, add)\", \"ratio\": {:.2f}, \"B\": 32, \"H\": 256, \"threads\": {}}}\n",
             r_cell, r_comp, r_cell / r_comp, threads);
  return 0;
}
