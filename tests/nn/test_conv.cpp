// conv1d / pooling ops (values against a direct computation, the op-table entries through
// gradcheck here too, bad input) and the nn layers (PyTorch shapes, output length, init bounds).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "autograd/conv.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/op_table.h"
#include "nn/conv.h"
#include "ops/error.h"

using namespace graft;

namespace {
// A direct triple loop over conv1d with symmetric padding (independent of the kernels).
std::vector<double> direct_conv(const std::vector<double>& x, const std::vector<double>& w,
                                int64_t B, int64_t Cin, int64_t L, int64_t Cout, int64_t K,
                                int64_t stride, int64_t pad, int64_t dil, int64_t G) {
  const int64_t Lout = (L + 2 * pad - dil * (K - 1) - 1) / stride + 1;
  std::vector<double> y(size_t(B * Cout * Lout), 0.0);
  const int64_t cg = Cin / G, og = Cout / G;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < Cout; ++o)
      for (int64_t t = 0; t < Lout; ++t)
        for (int64_t i = 0; i < cg; ++i)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t l = t * stride - pad + k * dil, c = (o / og) * cg + i;
            if (l >= 0 && l < L)
              y[size_t((b * Cout + o) * Lout + t)] +=
                  w[size_t((o * cg + i) * K + k)] * x[size_t((b * Cin + c) * L + l)];
          }
  return y;
}
}  // namespace

TEST_CASE("conv1d op: values match a direct computation; fast path float32 agrees") {
  Generator g(3);
  const int64_t B = 2, Cin = 4, L = 9, Cout = 6, K = 3, G = 2;
  Tensor x = uniform({B, Cin, L}, -1, 1, DType::f64, &g);
  Tensor w = uniform({Cout, Cin / G, K}, -1, 1, DType::f64, &g);
  for (auto [stride, pad, dil] : {std::tuple{1, 0, 1}, {2, 1, 1}, {1, 2, 2}, {3, 3, 1}}) {
    Tensor y = conv1d(x, w, {}, stride, pad, dil, G);
    auto expect = direct_conv(x.to_vector<double>(), w.to_vector<double>(), B, Cin, L, Cout, K,
                              stride, pad, dil, G);
    std::vector<double> got = y.to_vector<double>();
    REQUIRE(got.size() == expect.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expect[i]).epsilon(1e-12));
    Tensor y32 = conv1d(x.to(DType::f32), w.to(DType::f32), {}, stride, pad, dil, G);
    std::vector<double> got32 = y32.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got32[i] == doctest::Approx(expect[i]).epsilon(1e-4));
  }
}

TEST_CASE("conv1d op: padding names and output lengths follow PyTorch") {
  Tensor x = zeros({2, 3, 10});
  Tensor w = zeros({5, 3, 4});
  CHECK(conv1d(x, w, {}, 1, "valid").shape() == Shape{2, 5, 7});
  CHECK(conv1d(x, w, {}, 1, "same").shape() == Shape{2, 5, 10});
  CHECK(conv1d(x, w, {}, 1, "wide").shape() == Shape{2, 5, 13});  // L + K - 1
  CHECK(conv1d(x, w, {}, 1, "wide", 2).shape() == Shape{2, 5, 16});  // L + dil (K - 1)
  CHECK(conv1d(x, w, {}, 3, 2).shape() == Shape{2, 5, 4});  // (10 + 4 - 4) / 3 + 1
  CHECK(conv1d(x.select(0, 0), w).shape() == Shape{5, 7});   // unbatched
  // global pooling
  CHECK(global_avg_pool1d(ones({2, 3, 5})).shape() == Shape{2, 3});
  CHECK(sum(global_avg_pool1d(ones({2, 3, 5}))).item<double>() == doctest::Approx(6.0));
  Tensor r = from_vector(std::vector<double>{1, 5, 2, -1, 0, 3}, {1, 2, 3});
  CHECK(global_max_pool1d(r).to_vector<double>() == std::vector<double>{5, 3});
  CHECK(max_pool1d(r, 2, 1).to_vector<double>() == std::vector<double>{5, 5, 0, 3});
  CHECK(avg_pool1d(r, 3, 1).to_vector<double>()[0] == doctest::Approx(8.0 / 3));
}

TEST_CASE("conv1d op: bad shapes and arguments raise graft::Error") {
  Tensor x = zeros({2, 3, 10}), w = zeros({4, 3, 3});
  CHECK_THROWS_AS(conv1d(zeros({3}), w), Error);                 // rank
  CHECK_THROWS_AS(conv1d(zeros({2, 4, 10}), w), Error);          // channels
  CHECK_THROWS_AS(conv1d(x, zeros({4, 3})), Error);              // weight rank
  CHECK_THROWS_AS(conv1d(x, w, zeros({5})), Error);              // bias size
  CHECK_THROWS_AS(conv1d(x, w, {}, 0), Error);                   // stride
  CHECK_THROWS_AS(conv1d(x, w, {}, 1, -1), Error);               // padding
  CHECK_THROWS_AS(conv1d(x, w, {}, 1, 0, 0), Error);             // dilation
  CHECK_THROWS_AS(conv1d(x, w, {}, 1, 0, 1, 2), Error);          // groups: 3 % 2
  CHECK_THROWS_AS(conv1d(zeros({2, 3, 2}), w), Error);           // too short
  CHECK_THROWS_AS(conv1d(x, w, {}, 2, "same"), Error);           // same needs stride 1
  CHECK_THROWS_AS(conv1d(x, w, {}, 1, "full"), Error);           // unknown padding
  CHECK_THROWS_AS(conv1d(x, w.to(DType::f64)), Error);           // dtype mismatch
  CHECK_THROWS_AS(conv1d(x.to(DType::i64), w), Error);           // not float
  CHECK_THROWS_AS(max_pool1d(x, 0), Error);
  CHECK_THROWS_AS(max_pool1d(x, 3, 1, 2), Error);                // padding > k/2
  CHECK_THROWS_AS(avg_pool1d(x, 11), Error);                     // window > L
  CHECK_THROWS_AS(avg_pool1d(zeros({10}), 2), Error);
  CHECK_THROWS_AS(global_avg_pool1d(zeros({2, 3, 0})), Error);
  CHECK_THROWS_AS(nn::Conv1d(3, 4, 0), Error);
  CHECK_THROWS_AS(nn::Conv1d(3, 4, 3, {.groups = 2}), Error);
  CHECK_THROWS_AS(nn::Conv1d(3, 4, 3, {.padding = "two"}), Error);
  nn::Conv1d conv(3, 4, 3);
  CHECK_THROWS_AS(conv.forward(zeros({2, 10, 3})), Error);       // [B, L, C] by mistake
}

TEST_CASE("conv1d and pooling: the op-table cases pass gradcheck and gradgradcheck") {
  int checked = 0;
  for (const char* name : {"conv1d", "conv1d_backward_input", "conv1d_backward_weight",
                           "max_pool1d", "avg_pool1d", "max_pool1d_backward",
                           "avg_pool1d_backward"}) {
    const OpInfo* op = find_op(name);
    REQUIRE_MESSAGE(op != nullptr, name);
    Generator g(7);
    for (const OpCase& c : op->cases(g)) {
      INFO(name << " [" << c.label << "]");
      GradcheckResult r = gradcheck(c.fn, c.inputs, c.eps, c.atol);
      CHECK_MESSAGE(r.ok, r.message);
      GradcheckResult r2 = gradgradcheck(c.fn, c.inputs, c.eps, c.atol);
      CHECK_MESSAGE(r2.ok, r2.message);
      ++checked;
    }
  }
  CHECK(checked >= 14);
}

TEST_CASE("conv1d: a wrong gradient would be caught (gradcheck is not vacuous here)") {
  // conv1d scaled in forward only through a detached factor: gradcheck must fail.
  Generator g(5);
  Tensor x = uniform({1, 2, 5}, -1, 1, DType::f64, &g).requires_grad_(true);
  Tensor w = uniform({2, 2, 3}, -1, 1, DType::f64, &g).requires_grad_(true);
  auto bad = [](const std::vector<Tensor>& in) {
    Tensor y = conv1d(in[0], in[1]);
    return y + y.detach();  // the detached half has no gradient: analytical != numerical
  };
  CHECK_FALSE(gradcheck(bad, {x, w}).ok);
}

TEST_CASE("nn::Conv1d: PyTorch names, shapes, init bounds and output length") {
  nn::Conv1d conv(6, 4, 3, {.stride = 2, .padding = "1", .groups = 2});
  auto params = conv.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[0].second.shape() == Shape{4, 3, 3});  // [C_out, C_in/groups, K]
  CHECK(params[1].first == "bias");
  CHECK(params[1].second.shape() == Shape{4});
  const double bound = 1.0 / std::sqrt(3.0 * 3.0);  // fan_in = C_in/groups * K
  for (const auto& [name, p] : params) {
    INFO(name);
    CHECK(amax(abs(p)).item<double>() <= bound + 1e-7);
    CHECK(amax(abs(p)).item<double>() > bound * 0.3);  // not all zeros
  }
  for (int64_t L : {3, 4, 7, 10, 31}) {
    const int64_t expect = (L + 2 * 1 - 1 * (3 - 1) - 1) / 2 + 1;  // torch.nn.Conv1d docs
    CHECK(conv.output_length(L) == expect);
    CHECK(conv.forward(randn({2, 6, L})).shape() == Shape{2, 4, expect});
  }
  nn::Conv1d wide(5, 7, 4, {.padding = "wide", .bias = false});
  CHECK(wide.named_parameters().size() == 1);
  CHECK(wide.forward(randn({3, 5, 6})).shape() == Shape{3, 7, 9});
  nn::Conv1d same(5, 7, 4, {.padding = "same"});
  CHECK(same.forward(randn({5, 6})).shape() == Shape{7, 6});

  nn::AvgPool1d wap(3, 1);
  CHECK(wap.forward(randn({2, 4, 9})).shape() == Shape{2, 4, 7});
  nn::MaxPool1d mp(2);
  CHECK(mp.forward(randn({2, 4, 9})).shape() == Shape{2, 4, 4});
  nn::GlobalAvgPool1d allap;
  CHECK(allap.forward(randn({2, 4, 9})).shape() == Shape{2, 4});
}

TEST_CASE("nn::Conv1d learns a shift filter (training through oneDNN backward, float32)") {
  // target: y[t] = x[t - 1] (a causal shift), learned by a k3 'same' conv from random init.
  manual_seed(1);
  nn::Conv1d conv(1, 1, 3, {.padding = "same", .bias = false});
  Generator g(2);
  Tensor x = uniform({16, 1, 20}, -1, 1, DType::f32, &g);
  Tensor target = cat({zeros({16, 1, 1}), x.slice(2, 0, 19)}, 2);
  double loss0 = 0, loss = 0;
  for (int step = 0; step < 200; ++step) {
    conv.zero_grad();
    Tensor l = mean(square(conv.forward(x) - target));
    if (step == 0) loss0 = l.item<double>();
    loss = l.item<double>();
    l.backward();
    NoGradGuard ng;
    conv.weight.add_(conv.weight.grad(), -0.5);
  }
  CHECK(loss < loss0 * 1e-3);
  std::vector<double> wv = conv.weight.to_vector<double>();
  CHECK(wv[0] == doctest::Approx(1.0).epsilon(0.02));
  CHECK(std::abs(wv[1]) < 0.02);
  CHECK(std::abs(wv[2]) < 0.02);
}
