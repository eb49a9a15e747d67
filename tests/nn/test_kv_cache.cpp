// nn::KVCache: in-place writes into preallocated buffers (no reallocation while the capacity
// lasts, doubling when it runs out), equality with full recomputation on both paths (in place
// under NoGradGuard, concatenation under autograd, with gradients), beam-search reordering,
// and errors for mismatched appends.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "models/gpt.h"
#include "models/transformer.h"
#include "nn/attention.h"
#include "ops/error.h"
#include "ops/random.h"

using namespace graft;

namespace {
Tensor rnd(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, TensorOptions(DType::f64), &g);
}
double max_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}
}  // namespace

TEST_CASE("KV cache: one token at a time writes in place into the preallocated buffers") {
  manual_seed(3);
  nn::MultiheadAttention mha(8, 2);
  mha.to(DType::f64);
  Tensor x = rnd({2, 9, 8}, 7);  // B 2, T 9, C 8
  NoGradGuard ng;
  nn::KVCache cache;
  cache.capacity = 6;
  std::vector<Tensor> parts;
  const void* storage = nullptr;
  for (int64_t t = 0; t < 6; ++t) {
    Tensor xt = x.narrow(1, t, 1);
    parts.push_back(mha.forward(xt, xt, xt, {.is_causal = true, .cache = &cache}).output);
    REQUIRE(cache.k_buf.defined());
    if (t == 0) storage = cache.k_buf.storage().get();
    CHECK(cache.k_buf.storage().get() == storage);  // never reallocated within the capacity
    CHECK(cache.k.storage().get() == storage);      // k is a view of the buffer
    CHECK(cache.allocated() == 6);
    CHECK(cache.length() == t + 1);
  }
  // three more tokens (one call of 2, one of 1): the buffer doubles once
  for (auto [s, n] : {std::pair<int64_t, int64_t>{6, 2}, {8, 1}}) {
    Tensor xs = x.narrow(1, s, n);
    parts.push_back(mha.forward(xs, xs, xs, {.is_causal = true, .cache = &cache}).output);
  }
  CHECK(cache.allocated() == 12);
  CHECK(cache.length() == 9);
  Tensor full = mha.forward(x, x, x, {.is_causal = true}).output;
  CHECK(max_diff(cat(parts, 1), full) < 1e-12);
  cache.reset();
  CHECK(cache.length() == 0);
  CHECK_FALSE(cache.k_buf.defined());
}

TEST_CASE("KV cache: under autograd it concatenates, and gradients equal full recomputation") {
  manual_seed(4);
  nn::MultiheadAttention mha(8, 2);
  mha.to(DType::f64);
  Tensor x = rnd({1, 5, 8}, 9);
  nn::KVCache cache;
  std::vector<Tensor> parts;
  for (int64_t t = 0; t < 5; ++t) {
    Tensor xt = x.narrow(1, t, 1);
    parts.push_back(mha.forward(xt, xt, xt, {.is_causal = true, .cache = &cache}).output);
  }
  CHECK_FALSE(cache.k_buf.defined());  // differentiable path: no in-place buffer
  sum(cat(parts, 1) * cat(parts, 1)).backward();
  Tensor g_cached = mha.in_proj_weight.grad().clone();
  mha.zero_grad();
  Tensor full = mha.forward(x, x, x, {.is_causal = true}).output;
  sum(full * full).backward();
  CHECK(max_diff(g_cached, mha.in_proj_weight.grad()) < 1e-12);
}

TEST_CASE("KV cache: reorder selects batch rows (beam search), also changing the batch size") {
  NoGradGuard ng;
  nn::KVCache c;
  c.capacity = 4;
  Tensor k = rnd({2, 1, 2, 3}, 1), v = rnd({2, 1, 2, 3}, 2);  // B 2, H 1, L 2, Dh 3
  c.append(k, v);
  Tensor idx = from_vector(std::vector<int64_t>{1, 1, 0}, {3});
  c.reorder(idx);
  CHECK(c.k.size(0) == 3);
  CHECK(c.allocated() == 4);
  CHECK(max_diff(c.k, index_select(k, 0, idx)) == 0);
  CHECK(max_diff(c.v, index_select(v, 0, idx)) == 0);
  Tensor k2 = rnd({3, 1, 1, 3}, 3), v2 = rnd({3, 1, 1, 3}, 4);
  c.append(k2, v2);  // the reordered rows keep growing in place
  CHECK(max_diff(c.k, cat({index_select(k, 0, idx), k2}, 2)) == 0);
  Tensor swap = from_vector(std::vector<int64_t>{2, 0, 1}, {3});
  Tensor before = c.v.clone();
  c.reorder(swap);
  CHECK(max_diff(c.v, index_select(before, 0, swap)) == 0);
}

TEST_CASE("KV cache: appends longer than the doubled buffer grow to fit (S + L > 2 x allocated)") {
  NoGradGuard ng;
  nn::KVCache c;
  c.capacity = 2;
  // appends of lengths 1, 7 (8 > 2 x 2), 1, 20 (29 > 2 x 8) and 3: B 2, H 3, Dh 4
  std::vector<Tensor> ks, vs;
  uint64_t seed = 10;
  for (int64_t L : {1, 7, 1, 20, 3}) {
    ks.push_back(rnd({2, 3, L, 4}, seed++));
    vs.push_back(rnd({2, 3, L, 4}, seed++));
    c.append(ks.back(), vs.back());
    const Tensor want_k = cat(ks, 2), want_v = cat(vs, 2);
    CAPTURE(L);
    REQUIRE(c.length() == want_k.size(2));
    CHECK(c.allocated() >= c.length());
    CHECK(c.k.storage().get() == c.k_buf.storage().get());  // still a view of the buffer
    CHECK(max_diff(c.k, want_k) == 0);
    CHECK(max_diff(c.v, want_v) == 0);
  }
  CHECK(c.length() == 32);
  // a first append longer than the capacity allocates what it needs
  nn::KVCache d;
  d.capacity = 3;
  Tensor k = rnd({1, 2, 10, 4}, 50), v = rnd({1, 2, 10, 4}, 51);
  d.append(k, v);
  CHECK(d.allocated() >= 10);
  CHECK(max_diff(d.k, k) == 0);
  CHECK(max_diff(d.v, v) == 0);
}

TEST_CASE("KV cache: mismatched appends raise graft::Error and leave the cache as it was") {
  NoGradGuard ng;
  nn::KVCache c;
  c.append(rnd({2, 2, 3, 4}, 1), rnd({2, 2, 3, 4}, 2));
  CHECK_THROWS_AS(c.append(rnd({1, 2, 1, 4}, 3), rnd({1, 2, 1, 4}, 4)), Error);  // batch
  CHECK_THROWS_AS(c.append(rnd({2, 2, 1, 5}, 3), rnd({2, 2, 1, 5}, 4)), Error);  // head size
  CHECK_THROWS_AS(c.append(rnd({2, 2, 1, 4}, 3), rnd({2, 2, 2, 4}, 4)), Error);  // k/v lengths
  CHECK_THROWS_AS(c.append(rnd({2, 2, 1, 4}, 3).to(DType::f32), rnd({2, 2, 1, 4}, 4).to(DType::f32)), Error);
  CHECK_THROWS_AS(c.append(Tensor(), rnd({2, 2, 1, 4}, 4)), Error);
  CHECK(c.length() == 3);
}

TEST_CASE("KV cache: cached greedy and beam decoding equal uncached decoding (Transformer, GPT)") {
  manual_seed(8);
  models::Transformer tr({.src_vocab = 14, .tgt_vocab = 14, .d_model = 16, .nhead = 2,
                          .num_encoder_layers = 1, .num_decoder_layers = 2, .dim_feedforward = 32,
                          .dropout = 0.0, .max_len = 40});
  const std::vector<std::vector<int64_t>> src{{4, 5, 6, 7, 8, 9}, {10, 11, 4}, {12, 13, 5, 6}};
  for (int64_t beam : {1, 3}) {
    // max_len 30 > the decoders' capacity of 31 positions is not reached; 30 steps without <eos>
    const models::DecodeOptions o{.beam = beam, .max_len = 30};
    auto a = tr.translate(src, o, 2, true), b = tr.translate(src, o, 2, false);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].tokens == b[i].tokens);
      CHECK(a[i].logp == doctest::Approx(b[i].logp).epsilon(1e-4));
    }
  }
  models::GPT lm({.vocab = 12, .d_model = 16, .nhead = 2, .num_layers = 2, .dropout = 0.0, .max_len = 40});
  const models::SampleOptions so{.temperature = 1.0, .top_k = 5, .seed = 2};
  CHECK(lm.generate({1, 2, 3, 4}, 30, so, true) == lm.generate({1, 2, 3, 4}, 30, so, false));
}
