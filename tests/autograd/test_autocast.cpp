// bf16 autocast (autograd/autocast.h): matmul/linear round their operands to bf16 inside the
// guard, gradients stay f32, nothing changes outside it, and a short date-task training run
// under autocast follows the f32 loss curve.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/batching.h"
#include "data/seq2seq_tasks.h"
#include "models/transformer.h"
#include "nn/optim.h"
#include "ops/random.h"

using namespace graft;

namespace {

// The test's own bf16 rounding (round to nearest even on the top 16 bits of the f32).
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

Tensor rounded(const Tensor& x) {
  std::vector<float> v = x.contiguous().to_vector<float>();
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = round_bf16(v[i]);
  return from_vector(d, x.shape(), TensorOptions(DType::f32));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - double(y[i])));
  return m;
}

double max_abs(const Tensor& a) {
  double m = 0;
  for (float v : a.contiguous().to_vector<float>()) m = std::max(m, std::fabs(double(v)));
  return m;
}

}  // namespace

TEST_CASE("autocast: guard sets, nests and restores the precision") {
  CHECK(autocast_precision() == Precision::f32);
  {
    AutocastGuard ac(Precision::bf16);
    CHECK(autocast_enabled());
    {
      AutocastGuard off(Precision::f32);
      CHECK(!autocast_enabled());
    }
    CHECK(autocast_enabled());
  }
  CHECK(!autocast_enabled());
}

TEST_CASE("autocast: bf16 matmul is the f32 product of bf16-rounded operands") {
  Generator g(7);
  // a [2, 64, 96] @ b [96, 80] (broadcast), and a transposed operand: the layouts linear and
  // the backward pass produce.
  Tensor a = randn({2, 64, 96}, TensorOptions(DType::f32), &g);
  Tensor b = randn({96, 80}, TensorOptions(DType::f32), &g);
  Tensor bt = randn({80, 96}, TensorOptions(DType::f32), &g).t();
  Tensor exact = matmul(a, b), exact_t = matmul(a, bt);
  Tensor want = matmul(rounded(a), rounded(b)), want_t = matmul(rounded(a), rounded(bt.contiguous()));
  Tensor got, got_t;
  {
    AutocastGuard ac(Precision::bf16);
    got = matmul(a, b);
    got_t = matmul(a, bt);
  }
  CHECK(got.dtype() == DType::f32);
  const double scale = max_abs(exact);
  // same as the rounded-operand product up to f32 accumulation order
  CHECK(max_abs_diff(got, want) < 1e-5 * scale);
  CHECK(max_abs_diff(got_t, want_t) < 1e-5 * scale);
  // bf16 (8 mantissa bits) is visibly less precise than f32, but within its tolerance
  const double err = max_abs_diff(got, exact);
  CHECK(err > 1e-4 * scale);
  CHECK(err < 3e-2 * scale);
  // outside the guard matmul is f32 again, bit for bit
  CHECK(max_abs_diff(matmul(a, b), exact) == 0.0);
}

TEST_CASE("autocast: linear forward and backward run in bf16, gradients are f32") {
  Generator g(3);
  auto opt = TensorOptions(DType::f32);
  const Tensor x0 = randn({128, 64}, opt, &g), w0 = randn({96, 64}, opt, &g);
  const Tensor b0 = randn({96}, opt, &g), dy = randn({128, 96}, opt, &g);
  auto leaf = [](const Tensor& t) { return t.clone().requires_grad_(true); };
  // f32 reference
  Tensor x = leaf(x0), w = leaf(w0), b = leaf(b0);
  sum(linear(x, w, b) * dy).backward();
  const Tensor dx32 = x.grad(), dw32 = w.grad(), db32 = b.grad();
  x = leaf(x0), w = leaf(w0), b = leaf(b0);
  Tensor y;
  {
    AutocastGuard ac(Precision::bf16);
    y = linear(x, w, b);
  }
  sum(y * dy).backward();  // outside the guard: the backward follows the forward's precision
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(w.grad().dtype() == DType::f32);
  // dx = dy @ w and dw = dy^T @ x with bf16-rounded operands
  Tensor dx_want = matmul(rounded(dy), rounded(w.detach()));
  Tensor dw_want = matmul(rounded(dy.t().contiguous()), rounded(x.detach()));
  CHECK(max_abs_diff(x.grad(), dx_want) < 1e-5 * max_abs(dx32));
  CHECK(max_abs_diff(w.grad(), dw_want) < 1e-5 * max_abs(dw32));
  CHECK(max_abs_diff(x.grad(), dx32) > 0.0);
  CHECK(max_abs_diff(x.grad(), dx32) < 3e-2 * max_abs(dx32));
  // db is a sum over rows, which stays f32
  CHECK(max_abs_diff(b.grad(), db32) < 1e-4 * max_abs(db32));
}

TEST_CASE("autocast: float64 is never affected") {
  Generator g(5);
  auto opt = TensorOptions(DType::f64);
  Tensor a = randn({64, 64}, opt, &g), b = randn({64, 64}, opt, &g);
  Tensor exact = matmul(a, b), got;
  {
    AutocastGuard ac(Precision::bf16);
    got = matmul(a, b);
  }
  CHECK(got.dtype() == DType::f64);
  std::vector<double> x = exact.to_vector<double>(), y = got.to_vector<double>();
  CHECK(x == y);
}

TEST_CASE("autocast: a short date-task Transformer run follows the f32 loss curve") {
  // Character ids: printable ASCII -> 4 + (c - 32), after the 4 specials.
  Generator dg(11);
  std::vector<data::Example> ex = data::make_task("date", 64, {}, dg);
  auto ids = [](const std::string& s) {
    std::vector<int64_t> v;
    for (char c : s) v.push_back(4 + int64_t(c) - 32);
    return v;
  };
  std::vector<std::vector<int64_t>> src, tgt;
  for (const auto& e : ex) src.push_back(ids(e.source)), tgt.push_back(ids(e.target));
  data::Seq2SeqBatch batch = data::make_seq2seq_batch(src, tgt);
  auto run = [&](Precision p) {
    manual_seed(1);
    models::Transformer m({.src_vocab = 100, .tgt_vocab = 100, .d_model = 64, .nhead = 2,
                           .num_encoder_layers = 1, .num_decoder_layers = 1,
                           .dim_feedforward = 128, .dropout = 0.0, .max_len = 64});
    optim::Adam opt(m.parameters(), {.lr = 3e-3});
    std::vector<double> losses;
    for (int s = 0; s < 25; ++s) {
      opt.zero_grad();
      models::TransformerLoss l = [&] {
        AutocastGuard ac(p);
        return m.loss(batch, 0.0);
      }();
      l.loss.backward();
      opt.step();
      losses.push_back(l.nll);
    }
    return losses;
  };
  const std::vector<double> f32 = run(Precision::f32), bf16 = run(Precision::bf16);
  CHECK(f32.back() < 0.5 * f32.front());  // it learns
  CHECK(bf16.back() < 0.5 * bf16.front());
  bool differs = false;
  for (size_t s = 0; s < f32.size(); ++s) {
    INFO("step " << s << ": f32 " << f32[s] << " bf16 " << bf16[s]);
    CHECK(std::fabs(bf16[s] - f32[s]) < 0.05 * f32[s] + 0.02);
    differs = differs || bf16[s] != f32[s];
  }
  CHECK(differs);  // the bf16 path really ran
}
