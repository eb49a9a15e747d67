// Indexing, cross-entropy and dropout at the autograd level: forward values against small
// hand-computed examples, gradients (padding_idx, repeated indices, ignored rows), the errors
// for bad indices / dtypes / shapes / options, dropout statistics and reproducibility, and
// gradcheck + gradgradcheck over the op-table cases of these ops.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/random.h"
#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/op_table.h"
#include "tests/check_values.h"
#include "tests/error_of.h"

using namespace graft;
using namespace graft::test;

namespace {

Tensor f64(std::vector<double> v, const Shape& s, bool grad = false) {
  return from_vector(v, s, TensorOptions(DType::f64).requires_grad(grad));
}
Tensor i64(std::vector<int64_t> v, const Shape& s) { return from_vector(v, s); }



}  // namespace

TEST_CASE("embedding: rows of the weight, any index shape") {
  // weight [4, 2]: row r = (10r, 10r + 1)
  Tensor w = f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  Tensor y = embedding(w, i64({1, 3, 1, 0}, {2, 2}));
  CHECK(y.shape() == Shape{2, 2, 2});
  check_values(y, {10, 11, 30, 31, 10, 11, 0, 1});
  Tensor y1 = embedding(w, i64({2}, {1}));
  CHECK(y1.shape() == Shape{1, 2});
  check_values(y1, {20, 21});
  Tensor y0 = embedding(w, i64({3}, {}));  // 0-d indices -> [C]
  CHECK(y0.shape() == Shape{2});
  check_values(y0, {30, 31});
  // float32 weights work too
  Tensor y32 = embedding(w.to(DType::f32), i64({3, 0}, {2}));
  CHECK(y32.dtype() == DType::f32);
  check_values(y32, {30, 31, 0, 1});
}

TEST_CASE("embedding: gradient counts repeated ids; padding_idx rows get none") {
  Tensor w = f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, true);
  Tensor idx = i64({1, 3, 1, 0, 1, 2}, {2, 3});
  sum(embedding(w, idx)).backward();
  check_values(w.grad(), {1, 1, 3, 3, 1, 1, 1, 1});

  Tensor w2 = f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, true);
  Tensor y = embedding(w2, idx, 1);
  check_values(y, {10, 11, 30, 31, 10, 11, 0, 1, 10, 11, 20, 21});  // forward unaffected
  // weighted so that the gradient is not all ones: dL/dy = 2y
  sum(y * y).backward();
  check_values(w2.grad(), {0, 2, 0, 0, 40, 42, 60, 62});

  // negative padding_idx counts from the end (-1 -> row 3)
  Tensor w3 = f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, true);
  sum(embedding(w3, idx, -1)).backward();
  check_values(w3.grad(), {1, 1, 3, 3, 1, 1, 0, 0});

  // Finite differences see the padding row used in the forward, so gradcheck disagrees on
  // it (by design); with the padded outputs zeroed the function matches the padding rule.
  Tensor w4 = f64({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}, {4, 2}, true);
  auto plain = [&](const std::vector<Tensor>& in) { return embedding(in[0], idx, 1); };
  CHECK_FALSE(gradcheck(plain, {w4}));
  Tensor pad_mask = eq(idx, full(Shape{}, 1.0, DType::i64)).unsqueeze(-1);
  auto masked = [&](const std::vector<Tensor>& in) {
    return masked_fill(embedding(in[0], idx, 1), pad_mask, 0.0);
  };
  CHECK(gradcheck(masked, {w4}));
  CHECK(gradgradcheck(masked, {w4}));
}

TEST_CASE("embedding: bad indices and dtypes raise graft::Error") {
  Tensor w = zeros({1000, 4}, DType::f64);
  std::string msg = error_of([&] { embedding(w, i64({3, 1234, 5}, {3})); });
  INFO(msg);
  CHECK(contains(msg, "embedding: index 1234 out of range for a weight with 1000 rows (valid 0..999)"));
  CHECK_THROWS_AS(embedding(w, i64({-1}, {1})), Error);
  CHECK_THROWS_AS(embedding(w, i64({1000}, {1, 1})), Error);
  // float indices
  std::string m2 = error_of([&] { embedding(w, f64({1, 2}, {2})); });
  INFO(m2);
  CHECK(contains(m2, "embedding"));
  CHECK(contains(m2, "int64"));
  CHECK(contains(m2, "float64"));
  CHECK_THROWS_AS(embedding(w, f64({1, 2}, {2})), Error);
  // integer weight, 1-D weight, padding_idx out of range
  CHECK_THROWS_AS(embedding(zeros({4, 2}, DType::i64), i64({1}, {1})), Error);
  CHECK_THROWS_AS(embedding(zeros({4}, DType::f64), i64({1}, {1})), Error);
  CHECK_THROWS_AS(embedding(zeros({4, 2}, DType::f64), i64({1}, {1}), 4), Error);
  CHECK_THROWS_AS(embedding(zeros({4, 2}, DType::f64), i64({1}, {1}), -5), Error);
}

TEST_CASE("index_select: dims, repeated indices, gradient") {
  Tensor x = f64({0, 1, 2, 10, 11, 12, 20, 21, 22}, {3, 3}, true);
  Tensor r = index_select(x, 0, i64({2, 0, 2}, {3}));
  CHECK(r.shape() == Shape{3, 3});
  check_values(r, {20, 21, 22, 0, 1, 2, 20, 21, 22});
  Tensor c = index_select(x, 1, i64({1, 1}, {2}));
  CHECK(c.shape() == Shape{3, 2});
  check_values(c, {1, 1, 11, 11, 21, 21});
  Tensor ct = index_select(x.t(), -1, i64({0, 2}, {2}));  // columns of x^T = rows of x
  check_values(ct, {0, 20, 1, 21, 2, 22});

  sum(r).backward();
  check_values(x.grad(), {1, 1, 1, 0, 0, 0, 2, 2, 2});

  // int64 tensors can be selected (no gradient involved)
  check_values(index_select(i64({5, 6, 7}, {3}), 0, i64({2, 2, 0}, {3})), {7, 7, 5});

  std::string msg = error_of([&] { index_select(x, 1, i64({0, 3}, {2})); });
  INFO(msg);
  CHECK(contains(msg, "index_select: index 3 out of range for dim 1 of size 3"));
  std::string m2 = error_of([&] { index_select(x, 0, f64({0}, {1})); });
  CHECK(contains(m2, "index_select"));
  CHECK(contains(m2, "int64"));
  CHECK_THROWS_AS(index_select(x, 0, f64({0}, {1})), Error);
  CHECK_THROWS_AS(index_select(x, 0, i64({0, 1}, {1, 2})), Error);  // index must be 1-D
  CHECK_THROWS_AS(index_select(x, 2, i64({0}, {1})), Error);         // bad dim
}

TEST_CASE("gather: torch.gather semantics and gradient") {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3}, true);
  // dim 1: out[i][j] = x[i][index[i][j]]
  Tensor g1 = gather(x, 1, i64({2, 2, 0, 1}, {2, 2}));
  CHECK(g1.shape() == Shape{2, 2});
  check_values(g1, {3, 3, 4, 5});
  // dim 0: out[i][j] = x[index[i][j]][j]
  Tensor g0 = gather(x, 0, i64({1, 0, 1}, {1, 3}));
  CHECK(g0.shape() == Shape{1, 3});
  check_values(g0, {4, 2, 6});
  // an index smaller than the input along the other dim
  check_values(gather(x, 1, i64({1}, {1, 1})), {2});

  sum(g1).backward();
  check_values(x.grad(), {0, 0, 2, 1, 1, 0});

  std::string msg = error_of([&] { gather(x, 1, i64({0, 3}, {1, 2})); });
  INFO(msg);
  CHECK(contains(msg, "gather: index 3 out of range for dim 1 of size 3"));
  CHECK_THROWS_AS(gather(x, 1, i64({0, -1}, {1, 2})), Error);
  CHECK_THROWS_AS(gather(x, 1, f64({0, 1}, {1, 2})), Error);       // dtype
  CHECK_THROWS_AS(gather(x, 1, i64({0, 1}, {2})), Error);          // rank
  CHECK_THROWS_AS(gather(x, 1, i64({0, 0, 0}, {3, 1})), Error);    // too big along dim 0
}

TEST_CASE("cross_entropy: 2x3 example by hand") {
  const std::vector<double> L = {1.0, 2.0, 3.0, 1.0, 0.0, -1.0};
  auto lse = [&](int r) {
    return std::log(std::exp(L[3 * r]) + std::exp(L[3 * r + 1]) + std::exp(L[3 * r + 2]));
  };
  auto logp = [&](int r, int v) { return L[3 * r + v] - lse(r); };
  Tensor logits = f64(L, {2, 3});
  Tensor target = i64({2, 0}, {2});
  const double l0 = -logp(0, 2), l1 = -logp(1, 0);

  CrossEntropyOptions none;
  none.reduction = Reduction::none;
  Tensor rows = cross_entropy(logits, target, none);
  CHECK(rows.shape() == Shape{2});
  check_values(rows, {l0, l1});

  Tensor m = cross_entropy(logits, target);
  CHECK(m.shape() == Shape{});
  CHECK(m.item() == doctest::Approx((l0 + l1) / 2).epsilon(1e-12));

  CrossEntropyOptions s;
  s.reduction = Reduction::sum;
  CHECK(cross_entropy(logits, target, s).item() == doctest::Approx(l0 + l1).epsilon(1e-12));

  // ignore_index: row 1 ignored -> mean over row 0 only, per-row loss 0
  CrossEntropyOptions ig;
  ig.ignore_index = 7;
  Tensor t_ig = i64({2, 7}, {2});
  CHECK(cross_entropy(logits, t_ig, ig).item() == doctest::Approx(l0).epsilon(1e-12));
  ig.reduction = Reduction::none;
  check_values(cross_entropy(logits, t_ig, ig), {l0, 0.0});
  CHECK(cross_entropy(logits, i64({-100, 0}, {2})).item() == doctest::Approx(l1).epsilon(1e-12));
  // every row ignored: the mean is 0/0 = NaN, as in torch
  CHECK(std::isnan(cross_entropy(logits, i64({-100, -100}, {2})).item()));
  // 1-D logits [V] with a 0-d target
  CHECK(cross_entropy(f64({1.0, 2.0, 3.0}, {3}), i64({2}, {})).item() ==
        doctest::Approx(l0).epsilon(1e-12));

  // label smoothing 0.1: loss = -(0.9 logp[t] + 0.1/3 sum_v logp[v])
  CrossEntropyOptions ls;
  ls.label_smoothing = 0.1;
  ls.reduction = Reduction::none;
  auto smooth = [&](int r, int t) {
    double all = logp(r, 0) + logp(r, 1) + logp(r, 2);
    return -(0.9 * logp(r, t) + 0.1 / 3 * all);
  };
  check_values(cross_entropy(logits, target, ls), {smooth(0, 2), smooth(1, 0)});
  ls.reduction = Reduction::mean;
  CHECK(cross_entropy(logits, target, ls).item() ==
        doctest::Approx((smooth(0, 2) + smooth(1, 0)) / 2).epsilon(1e-12));

  // float32 logits
  CHECK(cross_entropy(logits.to(DType::f32), target).item() ==
        doctest::Approx((l0 + l1) / 2).epsilon(1e-5));
}

TEST_CASE("cross_entropy: gradient is (softmax - onehot) / rows, zero for ignored rows") {
  const std::vector<double> L = {1.0, 2.0, 3.0, 1.0, 0.0, -1.0, 0.5, 0.5, 0.5};
  Tensor logits = f64(L, {3, 3}, true);
  cross_entropy(logits, i64({2, -100, 1}, {3})).backward();
  std::vector<double> want(9, 0.0);
  for (int r : {0, 2}) {
    double z = std::exp(L[3 * r]) + std::exp(L[3 * r + 1]) + std::exp(L[3 * r + 2]);
    for (int v = 0; v < 3; ++v) want[3 * r + v] = std::exp(L[3 * r + v]) / z / 2.0;
  }
  want[2] -= 0.5;
  want[7] -= 0.5;
  check_values(logits.grad(), want, 1e-10);

  // create_graph takes the composite path: same first derivative
  Tensor l2 = f64(L, {3, 3}, true);
  Tensor loss = cross_entropy(l2, i64({2, -100, 1}, {3}));
  std::vector<Tensor> g = grad({loss}, {l2}, {}, false, true);
  check_values(g[0], want, 1e-10);
  CHECK(g[0].requires_grad());
}

TEST_CASE("cross_entropy: leading dims are flattened") {
  Generator gen(3);
  Tensor x = uniform({2, 3, 5}, -2, 2, DType::f64, &gen);
  Tensor t = i64({0, 4, 2, 2, 1, 3}, {2, 3});
  CrossEntropyOptions none;
  none.reduction = Reduction::none;
  Tensor rows = cross_entropy(x, t, none);
  CHECK(rows.shape() == Shape{2, 3});
  Tensor flat = cross_entropy(x.reshape({6, 5}), t.reshape({6}), none);
  check_values(rows, flat.to_vector<double>());
  CHECK(cross_entropy(x, t).item() == doctest::Approx(mean(flat).item()).epsilon(1e-12));
}

TEST_CASE("cross_entropy: class_dim 1 (PyTorch's [B, C] / [B, C, T]) equals the class-last form on the transposed logits") {
  Generator gen(7);
  Tensor btv = uniform({2, 3, 5}, -2, 2, DType::f64, &gen);          // [B, T, V]
  Tensor bct_base = btv.detach().transpose(1, 2).contiguous();         // [B, C=V, T], its own storage
  Tensor t = i64({0, 4, 2, 2, 1, 3}, {2, 3});                          // [B, T]
  for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
    for (int64_t ignore : {int64_t(-100), int64_t(2)}) {
      INFO("reduction " << int(red) << ", ignore_index " << ignore);
      CrossEntropyOptions last{.ignore_index = ignore, .label_smoothing = 0.1, .reduction = red};
      CrossEntropyOptions torch_layout = last;
      torch_layout.class_dim = 1;
      Tensor a = btv.detach().requires_grad_(), b = bct_base.detach().requires_grad_();
      Tensor la = cross_entropy(a, t, last), lb = cross_entropy(b, t, torch_layout);
      CHECK(lb.shape() == la.shape());  // none: the target's shape [B, T]
      check_values(lb, la.to_vector<double>());
      // gradients: the [B, C, T] one is the [B, T, V] one transposed back
      sum(la * la).backward();
      sum(lb * lb).backward();
      check_values(b.grad(), a.grad().transpose(1, 2).contiguous().to_vector<double>());
    }
  }
  // [B, C] with target [B]: class_dim 1 is the last dim, the same as the default
  Tensor bc = uniform({4, 5}, -2, 2, DType::f64, &gen);
  Tensor t4 = i64({1, 0, 4, 2}, {4});
  CHECK(cross_entropy(bc, t4, {.class_dim = 1}).item() == doctest::Approx(cross_entropy(bc, t4).item()).epsilon(1e-12));
  // [B, C, d1, d2] against class-last on the permuted logits; class_dim -3 is the same dim
  Tensor b4 = uniform({2, 5, 2, 3}, -2, 2, DType::f64, &gen);
  Tensor t12 = i64({0, 1, 2, 3, 4, 0, 1, 1, 2, 3, 4, 4}, {2, 2, 3});
  const double want = cross_entropy(b4.permute({0, 2, 3, 1}), t12).item();
  CHECK(cross_entropy(b4, t12, {.class_dim = 1}).item() == doctest::Approx(want).epsilon(1e-12));
  CHECK(cross_entropy(b4, t12, {.class_dim = -3}).item() == doctest::Approx(want).epsilon(1e-12));
  // float64 gradcheck and gradgradcheck of the PyTorch layout (also in the op table, every device)
  CrossEntropyOptions o{.ignore_index = 2, .label_smoothing = 0.2, .class_dim = 1};
  auto fn = [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, o); };
  Tensor x = uniform({2, 5, 3}, -2, 2, TensorOptions(DType::f64).requires_grad(), &gen);
  GradcheckResult r = gradcheck(fn, {x});
  CHECK_MESSAGE(r.ok, r.message);
  GradcheckResult rr = gradgradcheck(fn, {x});
  CHECK_MESSAGE(rr.ok, rr.message);
  // bad class dims and shapes name the class dim
  CHECK(contains(error_of([&] { cross_entropy(b4, t12, {.class_dim = 4}); }), "class_dim 4 is out of range"));
  CHECK(contains(error_of([&] { cross_entropy(b4, t12, {.class_dim = -5}); }), "out of range"));
  std::string m = error_of([&] { cross_entropy(btv, t, {.class_dim = 1}); });  // [B, T, V] is not [B, C, T]
  CHECK(contains(m, "expected target shape [2, 5]"));
  CHECK(contains(m, "class dim 1"));
}

TEST_CASE("cross_entropy_with_nll: the smoothed loss of cross_entropy and the plain NLL of the same rows") {
  Generator gen(11);
  Tensor t = i64({0, 4, 2, 2, 1, 3}, {2, 3});  // [B, T], 2 is ignored below
  for (int64_t cdim : {int64_t(-1), int64_t(1)}) {
    INFO("class_dim " << cdim);
    Tensor x = cdim == 1 ? uniform({2, 5, 3}, -3, 3, DType::f64, &gen)   // [B, C, T]
                         : uniform({2, 3, 5}, -3, 3, DType::f64, &gen);  // [B, T, V]
    CrossEntropyOptions o{.ignore_index = 2, .label_smoothing = 0.1, .class_dim = cdim};
    CrossEntropyOptions plain = o;
    plain.label_smoothing = 0.0;
    Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
    auto [loss, nll] = cross_entropy_with_nll(a, t, o);
    Tensor want = cross_entropy(b, t, o);
    check_values(loss, want.to_vector<double>());
    CHECK(nll == doctest::Approx(cross_entropy(x, t, plain).item()).epsilon(1e-13));
    CHECK(std::abs(nll - want.item()) > 1e-6);  // smoothing changes the loss, not nll
    // the loss trains as cross_entropy does
    loss.backward();
    want.backward();
    check_values(a.grad(), b.grad().to_vector<double>());
  }
  // by hand: rows [0, log 3] vs ..., one ignored: nll = mean of -log softmax at the targets
  Tensor two = f64({0, 0, 0, 1, 2, 3}, {2, 3});
  auto [l2, n2] = cross_entropy_with_nll(two, i64({1, -100}, {2}), {.label_smoothing = 0.5});
  CHECK(n2 == doctest::Approx(std::log(3.0)).epsilon(1e-14));
  CHECK(l2.item() == doctest::Approx(std::log(3.0)).epsilon(1e-14));  // uniform row: smoothing moves nothing
  auto [l3, n3] = cross_entropy_with_nll(two, i64({-100, -100}, {2}), {.label_smoothing = 0.1});
  CHECK(std::isnan(n3));
  CHECK(std::isnan(l3.item()));
}

TEST_CASE("cross_entropy: errors") {
  Tensor logits = zeros({3, 5}, DType::f64);
  std::string msg = error_of([&] { cross_entropy(logits, i64({0, 1, 7}, {3})); });
  INFO(msg);
  CHECK(contains(msg, "cross_entropy: target 7 out of range for 5 classes (row 2"));
  CHECK_THROWS_AS(cross_entropy(logits, i64({0, -1, 1}, {3})), Error);
  // wrong target dtype
  std::string m2 = error_of([&] { cross_entropy(logits, f64({0, 1, 2}, {3})); });
  CHECK(contains(m2, "int64"));
  CHECK(contains(m2, "float64"));
  CHECK_THROWS_AS(cross_entropy(logits, f64({0, 1, 2}, {3})), Error);
  // shape mismatch shows both shapes
  std::string m3 = error_of([&] { cross_entropy(logits, i64({0, 1}, {2})); });
  INFO(m3);
  CHECK(contains(m3, "[2]"));
  CHECK(contains(m3, "[3, 5]"));
  CHECK_THROWS_AS(cross_entropy(logits, i64({0, 1, 2}, {1, 3})), Error);
  // label smoothing outside [0, 1)
  CrossEntropyOptions bad;
  bad.label_smoothing = 1.0;
  CHECK_THROWS_AS(cross_entropy(logits, i64({0, 1, 2}, {3}), bad), Error);
  bad.label_smoothing = -0.1;
  CHECK_THROWS_AS(cross_entropy(logits, i64({0, 1, 2}, {3}), bad), Error);
  // integer logits
  CHECK_THROWS_AS(cross_entropy(zeros({3, 5}, DType::i64), i64({0, 1, 2}, {3})), Error);
}

TEST_CASE("dropout: identity when not training, p validated") {
  Tensor x = f64({1, 2, 3, 4}, {4}, true);
  CHECK(dropout(x, 0.5, false).same(x));
  CHECK(dropout(x, 0.0, true).same(x));
  CHECK_THROWS_AS(dropout(x, 1.0), Error);
  CHECK_THROWS_AS(dropout(x, -0.1), Error);
  CHECK_THROWS_AS(dropout(x, std::nan("")), Error);
}

TEST_CASE("dropout: zero fraction ~ p, kept values scaled by 1/(1-p), reproducible") {
  const int64_t n = 100000;
  const double p = 0.3;
  Tensor x = uniform({n}, 1.0, 2.0, DType::f32);  // never 0, so zeros come from the mask
  Generator g1(42);
  std::vector<float> xv = x.to_vector<float>();
  std::vector<float> yv = dropout(x, p, true, &g1).to_vector<float>();
  int64_t zeros_n = 0;
  bool scaled = true;
  for (int64_t i = 0; i < n; ++i) {
    if (yv[size_t(i)] == 0.0f) ++zeros_n;
    else scaled &= std::abs(yv[size_t(i)] - xv[size_t(i)] / float(1 - p)) <= 1e-5f * yv[size_t(i)];
  }
  CHECK(scaled);
  // binomial sd = sqrt(n p (1-p)) ~ 145 -> 0.15% of n; allow 1%
  CHECK(double(zeros_n) / double(n) == doctest::Approx(p).epsilon(0.01 / p));

  // same seed -> same mask; a generator advances, so a second draw differs
  Generator a(7), b(7);
  std::vector<float> ya = dropout(x, 0.5, true, &a).to_vector<float>();
  std::vector<float> yb = dropout(x, 0.5, true, &b).to_vector<float>();
  CHECK(ya == yb);
  std::vector<float> ya2 = dropout(x, 0.5, true, &a).to_vector<float>();
  CHECK(ya2 != ya);

  // gradient is the mask: dL/dx = mask / (1 - p)
  Tensor xg = ones({1000}, TensorOptions(DType::f64).requires_grad());
  Generator c(11);
  Tensor y = dropout(xg, 0.25, true, &c);
  sum(y).backward();
  check_values(xg.grad(), y.detach().to_vector<double>());
}

TEST_CASE("op-table cases of the index, loss and random ops pass gradcheck and gradgradcheck") {
  for (const char* name : {"embedding", "index_select", "gather", "index_add", "scatter_add",
                           "cross_entropy", "dropout"}) {
    const OpInfo* info = find_op(name);
    INFO(name);
    REQUIRE(info != nullptr);
    Generator gen(2024);
    std::vector<OpCase> cs = info->cases(gen);
    CHECK(!cs.empty());
    for (const OpCase& c : cs) {
      INFO(c.label);
      GradcheckResult r = gradcheck(c.fn, c.inputs, c.eps, c.atol);
      INFO(r.message);
      CHECK(r.ok);
      if (c.double_backward) {
        GradcheckResult r2 = gradgradcheck(c.fn, c.inputs, c.eps, c.atol);
        INFO(r2.message);
        CHECK(r2.ok);
      }
    }
  }
}

TEST_CASE("index_select_out writes the selection into a view and refuses what it cannot do") {
  Tensor x = arange(24, DType::f64).reshape({4, 3, 2});     // [4, 3, 2]
  Tensor buf = full({3, 5, 2}, -1.0, DType::f64);           // out = its first 3 positions of dim 1
  Tensor out = buf.narrow(1, 0, 3);
  Tensor idx = i64({2, 0, 2}, {3});
  index_select_out(out, x, 0, idx);
  CHECK(amax(abs(out - index_select(x, 0, idx))).item<double>() == 0);
  CHECK(amax(abs(buf.narrow(1, 3, 2) + 1.0)).item<double>() == 0);  // untouched
  Tensor wrong = zeros({2, 3, 2}, DType::f64);
  CHECK(has(error_of([&] { index_select_out(wrong, x, 0, idx); }), "expected float64 [3, 3, 2]"));
  Tensor same = x.narrow(0, 0, 3);  // out inside x: the copy would read what it writes
  CHECK(has(error_of([&] { index_select_out(same, x, 0, idx); }), "shares storage"));
  Tensor xg = f64({1, 2, 3, 4}, {2, 2}, true), og = zeros({1, 2}, DType::f64);
  CHECK(has(error_of([&] { index_select_out(og, xg, 0, i64({1}, {1})); }), "not differentiable"));
  CHECK(has(error_of([&] { index_select_out(og, xg.detach(), 0, i64({2}, {1})); }), "out of range"));
}
