// Transformer suite: the fused attention kernel against the composite path (values and
// gradients, every mask combination, dead rows, dropout, float64 and float32) and against the
// reference kernels; gradcheck of MultiheadAttention and the encoder/decoder layers; the causal
// property; KV-cache decoding against full recomputation; positional encodings; errors; and
// tiny models that must learn (a GPT on a fixed sequence, an encoder-decoder on copy/reverse).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/attention.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/op_table.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "models/gpt.h"
#include "models/transformer.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "ops/kernels.h"
#include "ops/random.h"

using namespace graft;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dt = DType::f64, bool grad = true) {
  Generator g(seed);
  return randn(s, TensorOptions(dt).requires_grad(grad), &g);
}
Tensor bools(const std::vector<int>& v, const Shape& s) {
  std::vector<double> d(v.begin(), v.end());
  return ne(from_vector(d, s, DType::f64), zeros(Shape{}, DType::f64));
}
double max_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::abs(x[i] - y[i]));
  }
  return m;
}
// a & b for bool masks (broadcasting)
Tensor both(const Tensor& a, const Tensor& b) {
  return ne(a.to(DType::f64) * b.to(DType::f64), zeros(Shape{}, DType::f64));
}
bool all_finite(const Tensor& t) {
  for (double x : t.to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

// Output and grads of q, k, v for a weighted sum of the output.
struct Run {
  Tensor out, dq, dk, dv;
};
Run run(const Tensor& q0, const Tensor& k0, const Tensor& v0, AttentionOptions o,
        AttentionImpl impl, uint64_t dropout_seed = 5) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(),
         v = v0.detach().requires_grad_();
  o.impl = impl;
  Generator gen(dropout_seed);
  o.generator = &gen;
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  Tensor w = rnd(out.shape(), 777, out.dtype(), false);
  sum(out * w).backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

void check_agree(const Run& a, const Run& b, double tol) {
  CHECK(max_diff(a.out, b.out) <= tol);
  CHECK(max_diff(a.dq, b.dq) <= tol);
  CHECK(max_diff(a.dk, b.dk) <= tol);
  CHECK(max_diff(a.dv, b.dv) <= tol);
}

struct MaskCase {
  const char* name;
  bool causal;
  int64_t offset;
  int kind;  // 0 none, 1 bool [T,S], 2 additive [T,S], 3 bool key padding [B,1,1,S], 4 both 1+3
  double dropout;
};

}  // namespace

TEST_CASE("attention: fused kernel equals the composite path for every mask combination") {
  // sizes that exercise several key blocks (S > 128), ragged row tiles (T % 4 != 0), head dims
  // that are not a multiple of the vector width, and E != D
  const int64_t B = 2, H = 2, T = 37, S = 150, D = 20, E = 12;
  const MaskCase cases[] = {
      {"none", false, 0, 0, 0.0},        {"causal", true, 0, 0, 0.0},
      {"causal offset -3", true, -3, 0, 0.0}, {"causal offset S-T", true, S - T, 0, 0.0},
      {"bool mask", false, 0, 1, 0.0},   {"additive mask + causal", true, 0, 2, 0.0},
      {"key padding", false, 0, 3, 0.0}, {"key padding + bool + causal", true, 5, 4, 0.0},
      {"dropout", false, 0, 0, 0.25},    {"dropout + padding + causal", true, 0, 3, 0.4},
  };
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-10 : 1e-5;
    Tensor q = rnd({B, H, T, D}, 1, dt), k = rnd({B, H, S, D}, 2, dt), v = rnd({B, H, S, E}, 3, dt);
    Generator mg(9);
    Tensor mb = lt(rand({T, S}, DType::f64, &mg), full(Shape{}, 0.8, DType::f64));  // ~80% attend
    Tensor madd = rnd({T, S}, 4, dt, false);
    std::vector<int> pad(size_t(B * S), 1);
    for (int64_t s = S - 40; s < S; ++s) pad[size_t(S + s)] = 0;  // batch 1: last 40 keys padded
    Tensor mpad = bools(pad, {B, 1, 1, S});
    for (const MaskCase& c : cases) {
      INFO(std::string(c.name) << " " << dtype_name(dt));
      AttentionOptions o;
      o.is_causal = c.causal;
      o.causal_offset = c.offset;
      o.dropout_p = c.dropout;
      if (c.kind == 1) o.attn_mask = mb;
      if (c.kind == 2) o.attn_mask = madd;
      if (c.kind == 3) o.attn_mask = mpad;
      if (c.kind == 4) o.attn_mask = both(mb, mpad);
      Run f = run(q, k, v, o, AttentionImpl::fused);
      Run cp = run(q, k, v, o, AttentionImpl::composite);
      check_agree(f, cp, tol);
      // the fast kernel against the scalar reference kernel
      set_use_reference_kernels(true);
      Run r = run(q, k, v, o, AttentionImpl::fused);
      set_use_reference_kernels(false);
      check_agree(f, r, tol);
    }
  }
}

TEST_CASE("attention: fused kernel equals composite at the benchmark head dims (64, 72)") {
  // D = 64 uses the register-blocked paths (several vectors of the head dim per pass), 72 their
  // vector and scalar tails; T = 70 > 64 keys also runs the blocked key loop of the scores.
  const int64_t B = 2, H = 2, T = 70;
  for (int64_t D : {64, 72})
    for (DType dt : {DType::f64, DType::f32}) {
      INFO("D " << D << " " << dtype_name(dt));
      const double tol = dt == DType::f64 ? 1e-10 : 1e-5;
      Tensor q = rnd({B, H, T, D}, 11, dt), k = rnd({B, H, T, D}, 12, dt), v = rnd({B, H, T, D}, 13, dt);
      std::vector<int> pad(size_t(B * T), 1);
      for (int64_t s = T - 9; s < T; ++s) pad[size_t(T + s)] = 0;  // batch 1: last 9 keys padded
      for (bool causal : {false, true}) {
        AttentionOptions o;
        o.is_causal = causal;
        o.dropout_p = 0.1;
        o.attn_mask = bools(pad, {B, 1, 1, T});
        Run f = run(q, k, v, o, AttentionImpl::fused);
        check_agree(f, run(q, k, v, o, AttentionImpl::composite), tol);
        set_use_reference_kernels(true);
        Run r = run(q, k, v, o, AttentionImpl::fused);
        set_use_reference_kernels(false);
        check_agree(f, r, tol);
      }
      // an additive mask broadcast over the keys ([T, 1]: stride 0 along S, the kernel's strided
      // path); a per-row constant leaves softmax unchanged, so every 5th row is -inf (dead)
      std::vector<double> mrow(static_cast<size_t>(T));
      for (int64_t i = 0; i < T; ++i)
        mrow[size_t(i)] = i % 5 == 0 ? -std::numeric_limits<double>::infinity() : 0.1 * double(i);
      AttentionOptions o;
      o.is_causal = true;
      o.attn_mask = from_vector(mrow, {T, 1}, TensorOptions(dt));
      check_agree(run(q, k, v, o, AttentionImpl::fused), run(q, k, v, o, AttentionImpl::composite), tol);
    }
}

TEST_CASE("attention: a row whose keys are all masked gives zeros and zero gradients, no NaN") {
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::composite}) {
    Tensor q = rnd({2, 3, 4}, 11), k = rnd({2, 5, 4}, 12), v = rnd({2, 5, 3}, 13);
    // SDPA convention (true = attend): query row 1 sees no key; with causal offset -1 row 0
    // also sees none
    std::vector<int> m(15, 1);
    for (int j = 0; j < 5; ++j) m[size_t(5 + j)] = 0;
    AttentionOptions o;
    o.attn_mask = bools(m, {3, 5});
    Run r = run(q, k, v, o, impl);
    CHECK(all_finite(r.out));
    CHECK(all_finite(r.dq));
    CHECK(all_finite(r.dk));
    CHECK(all_finite(r.dv));
    for (int64_t b = 0; b < 2; ++b) {
      CHECK(max_diff(r.out.select(0, b).select(0, 1), zeros({3}, DType::f64)) == 0.0);
      CHECK(max_diff(r.dq.select(0, b).select(0, 1), zeros({4}, DType::f64)) == 0.0);
    }
    CHECK(max_diff(r.out.select(1, 0), zeros({2, 3}, DType::f64)) > 0.0);  // other rows live
    o.is_causal = true;
    o.causal_offset = -1;
    Run rc = run(q, k, v, o, impl);
    CHECK(all_finite(rc.out));
    CHECK(max_diff(rc.out.select(1, 0), zeros({2, 3}, DType::f64)) == 0.0);
  }
}

TEST_CASE("attention: the op table holds both implementations and gradchecks them") {
  // (tests/autograd/test_op_table.cpp runs every case; here: they exist, and agree case by case)
  const OpInfo* fused_op = find_op("scaled_dot_product_attention");
  const OpInfo* comp = find_op("scaled_dot_product_attention_composite");
  REQUIRE(fused_op != nullptr);
  REQUIRE(comp != nullptr);
  Generator g1(3), g2(3);
  std::vector<OpCase> a = fused_op->cases(g1), b = comp->cases(g2);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].label);
    CHECK(max_diff(a[i].fn(a[i].inputs), b[i].fn(b[i].inputs)) < 1e-12);
    auto r = gradcheck(a[i].fn, a[i].inputs, a[i].eps, a[i].atol);
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("attention: bad shapes, masks and options raise graft::Error") {
  Tensor q = rnd({2, 3, 4}, 1, DType::f32, false), k = rnd({2, 5, 4}, 2, DType::f32, false);
  Tensor v = rnd({2, 5, 3}, 3, DType::f32, false);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, rnd({2, 5, 6}, 4, DType::f32, false), v), Error);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, rnd({2, 4, 3}, 5, DType::f32, false)), Error);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k.to(DType::f64), v), Error);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, rnd({3, 5, 4}, 6, DType::f32, false), v), Error);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, zeros({4, 5}, DType::f32)), Error);  // T=3
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, zeros({3, 5}, DType::i64)), Error);
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, v, {}, 1.0), Error);
  CHECK_THROWS_AS(scaled_dot_product_attention(q.reshape({12}), k, v), Error);
  CHECK_NOTHROW(scaled_dot_product_attention(q, k, v, zeros({2, 1, 5}, DType::f32)));
  CHECK_THROWS_AS(nn::MultiheadAttention(10, 3), Error);
  nn::MultiheadAttention mha(8, 2);
  CHECK_THROWS_AS(mha.forward(rnd({2, 3, 6}, 1, DType::f32, false)), Error);
  Tensor x = rnd({2, 3, 8}, 1, DType::f32, false);
  CHECK_THROWS_AS(mha.forward(x, x, x, {.key_padding_mask = zeros({2, 4}, DType::b8)}), Error);
  CHECK_THROWS_AS(mha.forward(x, x, x, {.attn_mask = zeros({3, 4}, DType::b8)}), Error);
  CHECK_THROWS_AS(nn::PositionalEncoding(8, 0.0, 4).forward(rnd({1, 5, 8}, 1, DType::f32, false)), Error);
  nn::TransformerLayerOptions lo{.d_model = 8, .nhead = 2, .dim_feedforward = 16, .activation = "tanh"};
  CHECK_THROWS_AS(nn::TransformerEncoderLayer{lo}, Error);
}

namespace {
// float64 module, no dropout
template <class M> std::shared_ptr<M> f64_module(std::shared_ptr<M> m) {
  m->to(DType::f64);
  m->eval();
  return m;
}
GradcheckResult check_params(nn::Module& m, std::vector<Tensor> in, const TensorFn& fn) {
  for (const Tensor& p : m.parameters()) in.push_back(p);
  return gradcheck(fn, in);
}
}  // namespace

TEST_CASE("MultiheadAttention: PyTorch parameter names, gradcheck in float64 with masks") {
  nn::MultiheadAttention packed(8, 2);
  std::vector<std::string> names;
  for (auto& [n, t] : packed.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                          "out_proj.bias"});
  nn::MultiheadAttention sep(8, 2, 0.0, true, 6, 5);
  names.clear();
  for (auto& [n, t] : sep.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                          "in_proj_bias", "out_proj.weight", "out_proj.bias"});

  manual_seed(1);
  auto self = f64_module(std::make_shared<nn::MultiheadAttention>(6, 2));
  Tensor x = rnd({2, 4, 6}, 21);
  Tensor kpm = bools({0, 0, 0, 0, 0, 0, 1, 1}, {2, 4});  // MHA convention: true = padding
  auto r = check_params(*self, {x}, [&](const std::vector<Tensor>& in) {
    return self->forward(in[0], in[0], in[0], {.key_padding_mask = kpm, .is_causal = true}).output;
  });
  CHECK_MESSAGE(r.ok, r.message);

  auto cross = f64_module(std::make_shared<nn::MultiheadAttention>(6, 3, 0.0, true, 4, 5));
  Tensor qx = rnd({2, 3, 6}, 22), kx = rnd({2, 5, 4}, 23), vx = rnd({2, 5, 5}, 24);
  Tensor am = rnd({3, 5}, 25, DType::f64, false);  // additive
  auto r2 = check_params(*cross, {qx, kx, vx}, [&](const std::vector<Tensor>& in) {
    return cross->forward(in[0], in[1], in[2], {.attn_mask = am}).output;
  });
  CHECK_MESSAGE(r2.ok, r2.message);
}

TEST_CASE("MultiheadAttention: fused and composite heads agree; weights are distributions") {
  manual_seed(2);
  nn::MultiheadAttention mha(8, 2);
  Tensor x = rnd({2, 5, 8}, 31, DType::f32, false);
  Tensor kpm = bools({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});
  Tensor am = bools({0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {5, 5});
  nn::MultiheadAttentionForward f{.key_padding_mask = kpm, .attn_mask = am, .is_causal = true};
  mha.impl = AttentionImpl::fused;
  Tensor a = mha.forward(x, x, x, f).output;
  mha.impl = AttentionImpl::composite;
  Tensor b = mha.forward(x, x, x, f).output;
  CHECK(max_diff(a, b) < 1e-5);
  f.need_weights = true;
  nn::AttentionResult w = mha.forward(x, x, x, f);
  CHECK(max_diff(w.output, a) < 1e-5);
  REQUIRE(w.weights.shape() == Shape{2, 5, 5});
  CHECK(max_diff(sum(w.weights, {-1}), ones({2, 5})) < 1e-5);
  std::vector<double> wv = w.weights.to_vector<double>();
  CHECK(wv[size_t(0 * 25 + 0 * 5 + 1)] == 0.0);  // causal: query 0 never sees key 1
  CHECK(wv[size_t(1 * 25 + 4 * 5 + 3)] == 0.0);  // batch 1 key 3 is padding
  CHECK(wv[size_t(0 * 25 + 2 * 5 + 3)] == 0.0);  // attn_mask [2, 3]
  CHECK(wv[size_t(0 * 25 + 2 * 5 + 1)] > 0.0);
}

TEST_CASE("Transformer layers: gradcheck of an encoder and a decoder layer (post- and pre-norm)") {
  for (bool pre : {false, true}) {
    INFO("norm_first " << pre);
    manual_seed(3);
    nn::TransformerLayerOptions lo{.d_model = 6, .nhead = 2, .dim_feedforward = 8, .dropout = 0.0,
                                   .activation = pre ? "gelu" : "relu", .norm_first = pre};
    auto enc = f64_module(std::make_shared<nn::TransformerEncoderLayer>(lo));
    Tensor src = rnd({2, 4, 6}, 41);
    Tensor kpm = bools({0, 0, 0, 0, 0, 0, 0, 1}, {2, 4});
    auto r = check_params(*enc, {src}, [&](const std::vector<Tensor>& in) {
      return enc->forward(in[0], {.key_padding_mask = kpm});
    });
    CHECK_MESSAGE(r.ok, r.message);
    auto dec = f64_module(std::make_shared<nn::TransformerDecoderLayer>(lo));
    Tensor tgt = rnd({2, 3, 6}, 42), mem = rnd({2, 4, 6}, 43);
    auto r2 = check_params(*dec, {tgt, mem}, [&](const std::vector<Tensor>& in) {
      return dec->forward(in[0], in[1], {.memory_key_padding_mask = kpm});
    });
    CHECK_MESSAGE(r2.ok, r2.message);
  }
}

TEST_CASE("positional encoding: the paper's formula") {
  const int64_t L = 7, C = 6;
  Tensor pe = nn::sinusoidal_positional_encoding(L, C, DType::f64);
  std::vector<double> v = pe.to_vector<double>();
  for (int64_t p = 0; p < L; ++p)
    for (int64_t i = 0; i < C / 2; ++i) {
      const double w = 1.0 / std::pow(10000.0, 2.0 * double(i) / double(C));
      CHECK(v[size_t(p * C + 2 * i)] == doctest::Approx(std::sin(double(p) * w)).epsilon(1e-14));
      CHECK(v[size_t(p * C + 2 * i + 1)] == doctest::Approx(std::cos(double(p) * w)).epsilon(1e-14));
    }
  nn::PositionalEncoding enc(C, 0.0, L);
  Tensor x = zeros({1, 3, C}, DType::f32);
  Tensor y = enc.forward(x, 2);  // positions 2, 3, 4
  CHECK(max_diff(y.select(0, 0), pe.narrow(0, 2, 3).to(DType::f32)) < 1e-7);
  nn::LearnedPositionalEmbedding lp(L, C, 0.0);
  CHECK(max_diff(lp.forward(x, 1).select(0, 0), lp.weight.narrow(0, 1, 3)) == 0.0);
}

TEST_CASE("causal property: changing future tokens leaves earlier outputs unchanged") {
  manual_seed(4);
  models::GPT lm({.vocab = 11, .d_model = 16, .nhead = 2, .num_layers = 2, .dropout = 0.0, .max_len = 16});
  lm.eval();
  Tensor a = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}, {1, 8});
  Tensor b = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 9, 10, 0}, {1, 8});
  Tensor la = lm.forward_ids(a), lb = lm.forward_ids(b);
  CHECK(max_diff(la.narrow(1, 0, 5), lb.narrow(1, 0, 5)) < 1e-6);
  CHECK(max_diff(la.narrow(1, 5, 1), lb.narrow(1, 5, 1)) > 1e-3);  // position 5 itself differs

  models::Transformer tr({.src_vocab = 12, .tgt_vocab = 12, .d_model = 16, .nhead = 2,
                          .num_encoder_layers = 1, .num_decoder_layers = 2, .dim_feedforward = 32,
                          .dropout = 0.0, .max_len = 16});
  tr.eval();
  Tensor src = from_vector(std::vector<int64_t>{4, 5, 6, 7}, {1, 4});
  Tensor mem = tr.encode(src);
  Tensor da = tr.decode(a.narrow(1, 0, 6), mem), db = tr.decode(b.narrow(1, 0, 6), mem);
  CHECK(max_diff(da.narrow(1, 0, 5), db.narrow(1, 0, 5)) < 1e-6);
  CHECK(max_diff(da.narrow(1, 5, 1), db.narrow(1, 5, 1)) > 1e-3);
}

TEST_CASE("KV cache: incremental decoding equals full recomputation") {
  manual_seed(5);
  // MultiheadAttention alone, 2 tokens then 1 then 3 at a time
  nn::MultiheadAttention mha(8, 2);
  Tensor x = rnd({2, 6, 8}, 51, DType::f32, false);
  Tensor full_out = mha.forward(x, x, x, {.is_causal = true}).output;
  nn::KVCache cache;
  std::vector<Tensor> parts;
  for (auto [s, n] : {std::pair<int64_t, int64_t>{0, 2}, {2, 1}, {3, 3}}) {
    Tensor xs = x.narrow(1, s, n);
    parts.push_back(mha.forward(xs, xs, xs, {.is_causal = true, .cache = &cache}).output);
  }
  CHECK(cache.length() == 6);
  CHECK(max_diff(cat(parts, 1), full_out) < 1e-5);

  // the encoder-decoder, token by token (self-attention cache + static cross-attention cache)
  models::Transformer tr({.src_vocab = 12, .tgt_vocab = 10, .d_model = 16, .nhead = 4,
                          .num_encoder_layers = 2, .num_decoder_layers = 2, .dim_feedforward = 32,
                          .dropout = 0.0, .max_len = 16});
  tr.eval();
  Tensor src = from_vector(std::vector<int64_t>{4, 5, 6, 7, 8, 0, 4, 9, 10, 11, 0, 0}, {2, 6});
  Tensor pad = eq(src, zeros(Shape{}, DType::i64));
  Tensor mem = tr.encode(src, pad);
  Tensor tgt = from_vector(std::vector<int64_t>{1, 4, 5, 6, 7, 1, 8, 9, 4, 5}, {2, 5});
  Tensor full_logits = tr.decode(tgt, mem, pad);
  nn::DecoderCache dc;
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < 5; ++t) steps.push_back(tr.decode(tgt.narrow(1, t, 1), mem, pad, &dc));
  CHECK(dc.length == 5);
  CHECK(max_diff(cat(steps, 1), full_logits) < 1e-5);

  // greedy and beam decoding give the same tokens with and without the cache
  std::vector<std::vector<int64_t>> srcs{{4, 5, 6, 7, 8}, {4, 9, 10, 11}};
  auto g1 = tr.translate(srcs, {.beam = 1, .max_len = 8}, 64, true);
  auto g2 = tr.translate(srcs, {.beam = 1, .max_len = 8}, 64, false);
  auto b1 = tr.translate(srcs, {.beam = 3, .max_len = 8}, 64, true);
  auto b2 = tr.translate(srcs, {.beam = 3, .max_len = 8}, 64, false);
  for (size_t i = 0; i < srcs.size(); ++i) {
    CHECK(g1[i].tokens == g2[i].tokens);
    CHECK(b1[i].tokens == b2[i].tokens);
    CHECK(b1[i].score == doctest::Approx(b2[i].score).epsilon(1e-4));
  }

  // the GPT's cached generation equals uncached generation (greedy and sampled)
  models::GPT lm({.vocab = 13, .d_model = 16, .nhead = 2, .num_layers = 2, .dropout = 0.0, .max_len = 32});
  for (models::SampleOptions so : {models::SampleOptions{.temperature = 0.0},
                                   models::SampleOptions{.temperature = 1.0, .top_k = 5, .seed = 3}}) {
    CHECK(lm.generate({1, 2, 3}, 12, so, true) == lm.generate({1, 2, 3}, 12, so, false));
  }
}

TEST_CASE("sampling: temperature, top-k and top-p pick from the right sets; seeded") {
  std::vector<double> logits{0.0, 3.0, 1.0, 2.9, -1.0};
  CHECK(models::sample_token(logits, {.temperature = 0.0}, 0.7) == 1);
  std::vector<int> seen(5, 0);
  for (int i = 0; i < 200; ++i)
    seen[size_t(models::sample_token(logits, {.top_k = 2}, philox_uniform(9, uint64_t(i))))]++;
  CHECK(seen[0] + seen[2] + seen[4] == 0);
  CHECK(seen[1] > 0);
  CHECK(seen[3] > 0);
  // top_p 0.5: the two leading tokens hold p ~ 0.47 and 0.43; only they remain
  std::fill(seen.begin(), seen.end(), 0);
  for (int i = 0; i < 200; ++i)
    seen[size_t(models::sample_token(logits, {.top_p = 0.5}, philox_uniform(10, uint64_t(i))))]++;
  CHECK(seen[0] + seen[2] + seen[4] == 0);
  CHECK(seen[3] > 0);
  // a low temperature concentrates on the arg-max
  std::fill(seen.begin(), seen.end(), 0);
  for (int i = 0; i < 200; ++i)
    seen[size_t(models::sample_token(logits, {.temperature = 0.05}, philox_uniform(11, uint64_t(i))))]++;
  CHECK(seen[1] > 150);
  CHECK_THROWS_AS(models::sample_token(logits, {.top_p = 0.0}, 0.5), Error);
  models::GPT lm({.vocab = 7, .d_model = 8, .nhead = 2, .num_layers = 1, .max_len = 8});
  CHECK(lm.generate({1}, 5, {.seed = 4}) == lm.generate({1}, 5, {.seed = 4}));
  CHECK_THROWS_AS(lm.generate({1, 2, 3, 4}, 5), Error);  // exceeds max_len
  CHECK_THROWS_AS(lm.generate({}, 2), Error);
}

TEST_CASE("a tiny GPT learns a deterministic sequence in seconds") {
  manual_seed(6);
  const int64_t V = 10, L = 12;
  models::GPT lm({.vocab = V, .d_model = 32, .nhead = 2, .num_layers = 2, .dropout = 0.0, .max_len = 32});
  optim::Adam opt(lm.parameters(), {.lr = 3e-3});
  Generator g(7);
  // the sequence: 0 1 2 ... 9 0 1 ... ; each batch holds random windows of length L + 1
  auto batch = [&](int64_t B) {
    std::vector<int64_t> ids;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t start = int64_t(philox_uniform(g.seed, g.advance(1)) * V);
      for (int64_t t = 0; t <= L; ++t) ids.push_back((start + t) % V);
    }
    return from_vector(ids, {B, L + 1});
  };
  double first = 0, last = 0;
  for (int step = 0; step < 120; ++step) {
    opt.zero_grad();
    Tensor loss = lm.loss(batch(16));
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  MESSAGE("GPT: loss " << first << " -> " << last);
  CHECK(last < 0.05 * first);
  std::vector<int64_t> out = lm.generate({3, 4, 5}, 20, {.temperature = 0.0});
  std::vector<int64_t> want;
  for (int64_t t = 0; t < 20; ++t) want.push_back((6 + t) % V);
  CHECK(out == want);
}

TEST_CASE("a tiny encoder-decoder learns to reverse strings in seconds") {
  manual_seed(8);
  Generator g(9);
  data::TaskOptions to{.min_len = 2, .max_len = 6, .num_symbols = 6};
  std::vector<data::Example> train = data::make_task("reverse", 4000, to, g);
  std::vector<data::Example> test = data::make_task("reverse", 60, to, g);
  std::vector<std::string> texts;
  for (auto& e : train) {
    texts.push_back(e.source);
    texts.push_back(e.target);
  }
  data::CharTokenizer tok = data::CharTokenizer::fit(texts);
  const int64_t V = tok.vocab().size();
  models::Transformer tr({.src_vocab = V, .tgt_vocab = V, .d_model = 32, .nhead = 2,
                          .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = 64,
                          .dropout = 0.0, .share_embeddings = true, .max_len = 16});
  optim::Adam opt(tr.parameters(), {.lr = 1.0, .beta2 = 0.98, .eps = 1e-9});
  optim::Noam sched(opt, 32, 50, 0.4);
  const int64_t B = 32;
  double first = 0, last = 0;
  for (int step = 0; step < 400; ++step) {
    std::vector<std::vector<int64_t>> src, tgt;
    for (int64_t b = 0; b < B; ++b) {
      const data::Example& e = train[size_t((step * B + b) % int64_t(train.size()))];
      src.push_back(tok.encode(e.source));
      tgt.push_back(tok.encode(e.target));
    }
    opt.zero_grad();
    models::TransformerLoss l = tr.loss(data::make_seq2seq_batch(src, tgt), 0.1);
    l.loss.backward();
    opt.step();
    sched.step();
    if (step == 0) first = l.nll;
    last = l.nll;
  }
  INFO("nll " << first << " -> " << last);
  std::vector<std::vector<int64_t>> srcs;
  for (auto& e : test) srcs.push_back(tok.encode(e.source));
  auto hyps = tr.translate(srcs, {.beam = 1, .max_len = 10});
  int correct = 0;
  for (size_t i = 0; i < test.size(); ++i) correct += tok.decode(hyps[i].tokens) == test[i].target;
  MESSAGE("reverse: nll " << first << " -> " << last << ", greedy exact match " << correct << " / "
                          << test.size());
  CHECK(correct >= int(0.9 * double(test.size())));
  auto beam = tr.translate(srcs, {.beam = 3, .max_len = 10});
  int beam_correct = 0;
  for (size_t i = 0; i < test.size(); ++i) beam_correct += tok.decode(beam[i].tokens) == test[i].target;
  CHECK(beam_correct >= int(0.9 * double(test.size())));
  // a cross-attention map for a heatmap: rows are distributions over the source
  Tensor w = tr.cross_attention(srcs[0], hyps[0].tokens);
  CHECK(w.shape() == Shape{int64_t(hyps[0].tokens.size()) + 1, int64_t(srcs[0].size())});
  CHECK(max_diff(sum(w, {-1}), ones({w.size(0)})) < 1e-5);
}

TEST_CASE("Transformer init: layers keeps each layer's reset, xavier resets every stack matrix") {
  // std of U(-b, b) is b / sqrt(3): Kaiming (a = sqrt 5) b = 1/sqrt(fan_in); Xavier
  // b = sqrt(6 / (fan_in + fan_out)).
  const int64_t C = 64, F = 256;
  auto spread = [&](const std::string& init, const std::string& name) {
    manual_seed(3);
    models::Transformer tr({.src_vocab = 10, .tgt_vocab = 10, .d_model = C, .nhead = 2,
                            .num_encoder_layers = 1, .num_decoder_layers = 1, .dim_feedforward = F,
                            .init = init});
    for (const auto& [n, p] : tr.named_parameters())
      if (n == name) return std::sqrt(mean(p * p).item<double>());
    FAIL("no parameter " << name);
    return 0.0;
  };
  const double kaiming2 = 1.0 / std::sqrt(3.0 * F), xavier2 = std::sqrt(2.0 / double(C + F));
  CHECK(spread("layers", "encoder.layers.0.linear2.weight") == doctest::Approx(kaiming2).epsilon(0.05));
  CHECK(spread("xavier", "encoder.layers.0.linear2.weight") == doctest::Approx(xavier2).epsilon(0.05));
  CHECK(spread("xavier", "decoder.layers.0.multihead_attn.out_proj.weight") ==
        doctest::Approx(std::sqrt(1.0 / double(C))).epsilon(0.05));
  CHECK(spread("layers", "decoder.layers.0.multihead_attn.out_proj.weight") ==
        doctest::Approx(1.0 / std::sqrt(3.0 * C)).epsilon(0.05));
  CHECK(spread("xavier", "encoder.layers.0.norm1.weight") == doctest::Approx(1.0));  // untouched
  CHECK_THROWS_WITH_AS(models::Transformer({.src_vocab = 10, .tgt_vocab = 10, .d_model = 8,
                                            .nhead = 2, .init = "he"}),
                       doctest::Contains("init must be \"layers\" or \"xavier\""), graft::Error);
  models::TransformerOptions o{.src_vocab = 10, .tgt_vocab = 10, .init = "xavier"};
  CHECK(models::TransformerOptions::from_json(o.to_json()).init == "xavier");
}
