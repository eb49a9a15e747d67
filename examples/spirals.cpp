// Two spirals: a 2 -> 64 -> 64 -> 2 MLP learns to tell two interleaved spirals apart.
//
// Everything is written with graft ops directly (no nn/ modules): parameters are leaf tensors
// with requires_grad, the forward pass is three `linear` calls, and the Adam update is a few
// in-place tensor ops under NoGradGuard. Exits 0 once training accuracy reaches 100%.
#include <cmath>
#include <exception>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graft.h"
#include "example_main.h"

using namespace graft;

// 2 * n points: spiral c (class 0 or 1) is r -> (r cos(a), r sin(a)), a = 5 pi r + c pi,
// for r in (0.1, 1] (about 2.25 turns each), plus a little Gaussian noise.
void make_spirals(int n, double noise, Generator& gen, Tensor& x, Tensor& y) {
  std::vector<double> points;
  std::vector<int64_t> labels;
  for (int c = 0; c < 2; ++c)
    for (int i = 1; i <= n; ++i) {
      double r = 0.1 + 0.9 * i / n, a = 5 * std::numbers::pi * r + c * std::numbers::pi;
      points.insert(points.end(), {r * std::cos(a), r * std::sin(a)});
      labels.push_back(c);
    }
  x = from_vector(points, {2 * n, 2}) + noise * randn({2 * n, 2}, {}, &gen);  // [N, 2]
  y = from_vector(labels, {2 * n});                                             // [N] int64
}

// A weight [out, in] drawn like Kaiming-normal init (std = sqrt(2 / in)), and a zero bias.
Tensor make_weight(int64_t out, int64_t in, Generator& gen) {
  Tensor w = randn({out, in}, {}, &gen);
  w.mul_(std::sqrt(2.0 / double(in)));
  return w.requires_grad_();
}
Tensor make_bias(int64_t out) { return zeros({out}).requires_grad_(); }

struct Mlp {
  Tensor w1, b1, w2, b2, w3, b3;
  std::vector<Tensor> params() const { return {w1, b1, w2, b2, w3, b3}; }
  Tensor operator()(const Tensor& x) const {  // x [N, 2] -> logits [N, 2]
    Tensor h = tanh(linear(x, w1, b1));
    h = tanh(linear(h, w2, b2));
    return linear(h, w3, b3);
  }
};

// Fraction of rows whose largest logit is the target class.
double accuracy(const Tensor& logits, const Tensor& y) {
  return mean(eq(argmax(logits, 1), y).to(DType::f32)).item();
}

// Draws the learned decision regions ('.' class 0, blank class 1) and the data on top
// ('o' class 0, 'x' class 1).
void plot(const Mlp& model, const Tensor& x, const Tensor& y) {
  const int W = 64, H = 28;
  std::vector<double> grid;
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < W; ++c)
      grid.insert(grid.end(), {-1.2 + 2.4 * c / (W - 1), 1.2 - 2.4 * r / (H - 1)});
  NoGradGuard no_grad;
  auto region = argmax(model(from_vector(grid, {W * H, 2})), 1).to_vector<int64_t>();
  std::vector<std::string> canvas(H, std::string(W, ' '));
  for (int i = 0; i < W * H; ++i) canvas[i / W][i % W] = region[i] == 0 ? '.' : ' ';
  auto px = x.to_vector<double>();
  auto py = y.to_vector<int64_t>();
  for (size_t i = 0; i < py.size(); ++i) {
    int c = int(std::lround((px[2 * i] + 1.2) / 2.4 * (W - 1)));
    int r = int(std::lround((1.2 - px[2 * i + 1]) / 2.4 * (H - 1)));
    if (r >= 0 && r < H && c >= 0 && c < W) canvas[r][c] = py[i] == 0 ? 'o' : 'x';
  }
  for (const auto& line : canvas) fmt::print("  |{}|\n", line);
}

int train() {
  const int points_per_class = 200, max_epochs = 2000, log_every = 50;
  const double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;

  Generator gen(42);
  Tensor x, y;
  make_spirals(points_per_class, 0.02, gen, x, y);
  Mlp model{make_weight(64, 2, gen), make_bias(64), make_weight(64, 64, gen), make_bias(64),
            make_weight(2, 64, gen), make_bias(2)};
  fmt::print("two spirals: {} points, MLP 2 -> 64 -> 64 -> 2 (tanh), Adam lr {}\n",
             x.size(0), lr);

  // Adam state: first and second moment estimates, one pair per parameter.
  std::vector<Tensor> params = model.params(), m, v;
  for (const Tensor& p : params) {
    m.push_back(zeros_like(p));
    v.push_back(zeros_like(p));
  }

  double acc = 0;
  int epoch = 0;
  while (epoch < max_epochs) {
    ++epoch;
    Tensor logits = model(x);
    Tensor loss = cross_entropy(logits, y);
    acc = accuracy(logits, y);
    if (epoch % log_every == 0 || epoch == 1 || acc == 1.0)
      fmt::print("epoch {:5d}  loss {:.4f}  accuracy {:6.2f}%\n", epoch, loss.item(), 100 * acc);
    if (acc == 1.0) break;
    loss.backward();

    NoGradGuard no_grad;  // the update itself is not recorded on the tape
    double bc1 = 1 - std::pow(beta1, epoch), bc2 = 1 - std::pow(beta2, epoch);
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad();
      m[i].mul_(beta1).add_(g, 1 - beta1);               // m = b1 m + (1 - b1) g
      v[i].copy_(beta2 * v[i] + (1 - beta2) * (g * g));  // v = b2 v + (1 - b2) g^2
      // p -= lr * m^ / (sqrt(v^) + eps), with bias-corrected m^ = m / bc1, v^ = v / bc2
      params[i].add_((m[i] / bc1) / (sqrt(v[i] / bc2) + eps), -lr);
      g.zero_();
    }
  }

  plot(model, x, y);
  fmt::print("final training accuracy: {:.2f}% after {} epochs\n", 100 * acc, epoch);
  return verdict(acc < 1.0 ? fmt::format("the model did not reach 100% training accuracy in {} epochs",
                                         max_epochs) : "",
                 "every training point is classified correctly");
}

int main() {
  return run_example("spirals", [&] { return train(); });
}
