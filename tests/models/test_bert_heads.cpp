// BERT fine-tuning heads: names (bert.* + classifier.*, no cls.*), shapes, loading the encoder
// from a pretraining state dict (exact copy, errors change nothing), a float64 gradcheck through
// the whole sequence classifier, and tiny heads fitting toy tasks (a sentence-pair task that
// needs the segment ids, and a per-token task).
#include <doctest/doctest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "models/bert.h"
#include "models/bert_heads.h"
#include "nn/optim.h"
#include "ops/error.h"
#include "ops/random.h"

using namespace graft;

namespace {

models::BertConfig small_config(double dropout = 0.0) {
  models::BertConfig c;
  c.vocab_size = 20, c.hidden_size = 16, c.num_layers = 1, c.num_heads = 2;
  c.intermediate_size = 32, c.max_position_embeddings = 16, c.dropout = dropout;
  return c;
}

std::set<std::string> names(const nn::Module& m) {
  std::set<std::string> s;
  for (const auto& [n, t] : m.named_parameters()) s.insert(n);
  return s;
}

double accuracy(const Tensor& logits, const std::vector<int64_t>& y) {
  std::vector<int64_t> p = argmax(logits, -1).contiguous().to_vector<int64_t>();
  int64_t ok = 0, n = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (y[i] != -100) ok += p[i] == y[i], ++n;
  return double(ok) / double(n);
}

}  // namespace

TEST_CASE("bert heads: Hugging Face names, no pretraining heads, shapes") {
  manual_seed(1);
  models::BertForSequenceClassification seq(small_config(), 3);
  models::BertForTokenClassification tok(small_config(), 4);
  const auto s = names(seq), t = names(tok);
  for (const char* n : {"bert.embeddings.word_embeddings.weight", "bert.embeddings.LayerNorm.weight",
                        "bert.pooler.dense.weight", "classifier.weight", "classifier.bias"})
    CHECK_MESSAGE(s.count(n) == 1, n);
  CHECK(t.count("bert.pooler.dense.weight") == 0);  // token classification has no pooler
  CHECK(t.count("classifier.weight") == 1);
  for (const auto& n : s) CHECK_MESSAGE(n.rfind("cls.", 0) != 0, n);
  bool has_layer = false;
  for (const auto& n : s) has_layer |= n.rfind("bert.encoder.layers.0.", 0) == 0;
  CHECK(has_layer);
  // Every parameter of the head is a parameter of the pretraining model minus its cls.* heads.
  models::BertForPreTraining pre(small_config());
  CHECK(int64_t(s.size()) == int64_t(names(pre).size()) - 7 + 2);  // - cls.* (7 tensors) + classifier

  Tensor ids = from_vector(std::vector<int64_t>{2, 5, 6, 3, 7, 8, 3, 0, 2, 9, 3, 0, 0, 0, 0, 0}, {2, 8});
  Tensor types = from_vector(std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 8});
  CHECK(seq.forward(ids, types).shape() == Shape{2, 3});
  CHECK(tok.forward(ids, types).shape() == Shape{2, 8, 4});
  CHECK(seq.loss(seq.forward(ids, types), from_vector(std::vector<int64_t>{0, 2}, {2})).numel() == 1);
}

TEST_CASE("bert heads: bad input is a graft::Error") {
  CHECK_THROWS_AS(models::BertForSequenceClassification(small_config(), 0), Error);
  models::BertForSequenceClassification seq(small_config(), 3);
  models::BertForTokenClassification tok(small_config(), 4);
  Tensor ids = from_vector(std::vector<int64_t>{2, 5, 3, 2, 6, 3}, {2, 3});
  Tensor types = zeros({2, 3}, DType::i64);
  Tensor logits = seq.forward(ids, types);
  CHECK_THROWS_AS(seq.loss(logits, from_vector(std::vector<int64_t>{0, 1, 2}, {3})), Error);
  CHECK_THROWS_AS(seq.loss(logits, from_vector(std::vector<double>{0, 1}, {2})), Error);
  CHECK_THROWS_AS(tok.loss(tok.forward(ids, types), from_vector(std::vector<int64_t>{0, 1}, {2})), Error);
  CHECK_THROWS_AS(seq.forward(ids, zeros({2, 4}, DType::i64)), Error);
}

TEST_CASE("bert heads: load_pretrained copies the encoder exactly; errors change nothing") {
  manual_seed(7);
  models::BertForPreTraining pre(small_config());
  manual_seed(8);
  models::BertForSequenceClassification seq(small_config(), 3);
  Tensor ids = from_vector(std::vector<int64_t>{2, 5, 6, 3, 7, 8, 3, 2, 9, 3, 0, 0, 0, 0}, {2, 7});
  Tensor types = from_vector(std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, {2, 7});
  NoGradGuard ng;
  pre.eval(), seq.eval();
  const std::vector<float> want = pre.pool(pre.encode(ids, types)).to_vector<float>();
  auto pooled = [&] { return seq.body->pool(seq.body->encode(ids, types)).to_vector<float>(); };
  CHECK(pooled() != want);  // different seeds: different weights before loading
  const std::vector<float> cls_before = seq.classifier->weight.to_vector<float>();

  // A missing key or a wrong shape: graft::Error, nothing changed.
  nn::StateDict sd = pre.state_dict(), partial;
  for (const auto& [n, t] : sd)
    if (n != "pooler.dense.bias") partial.emplace_back(n, t);
  const std::vector<float> before = pooled();
  CHECK_THROWS_AS(seq.load_pretrained(partial), Error);
  CHECK(pooled() == before);
  models::BertConfig wide = small_config();
  wide.hidden_size = 32;
  models::BertForPreTraining other(wide);
  CHECK_THROWS_AS(seq.load_pretrained(other.state_dict()), Error);
  CHECK(pooled() == before);

  seq.load_pretrained(sd);
  CHECK(pooled() == want);  // bit-identical encoder and pooler
  CHECK(seq.classifier->weight.to_vector<float>() == cls_before);  // the head is untouched

  // A head's own state dict ("bert."-prefixed names) loads into another head, the token one too.
  models::BertForTokenClassification tok(small_config(), 4);
  tok.eval();
  tok.load_pretrained(seq.state_dict());
  CHECK(tok.body->encode(ids, types).to_vector<float>() == pre.encode(ids, types).to_vector<float>());
}

TEST_CASE("bert heads: float64 gradcheck of the sequence classifier (pair input)") {
  manual_seed(3);
  models::BertConfig c = small_config();
  c.hidden_size = 8, c.intermediate_size = 16, c.num_heads = 2, c.vocab_size = 10;
  models::BertForSequenceClassification m(c, 3);
  m.to(DType::f64);
  m.eval();
  Tensor ids = from_vector(std::vector<int64_t>{2, 5, 3, 6, 3, 2, 7, 3, 0, 0}, {2, 5});
  Tensor types = from_vector(std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5});
  Tensor y = from_vector(std::vector<int64_t>{1, 2}, {2});
  // d loss / d (word embeddings, classifier weight): through the encoder, pooler and head.
  std::vector<Tensor> inputs = {m.body->word_embeddings->weight, m.classifier->weight};
  auto fn = [&](const std::vector<Tensor>& in) {
    m.body->word_embeddings->weight = in[0];
    m.classifier->weight = in[1];
    return m.loss(m.forward(ids, types), y);
  };
  GradcheckResult r = gradcheck(fn, inputs);
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("bert heads: a tiny sequence-pair classifier uses the segment ids") {
  // [CLS] a [SEP] b [SEP] with a, b in {5..9}; label 1 when a == b. Only the token types (and
  // positions) tell the two tokens apart, so the encoder must use them.
  manual_seed(11);
  models::BertConfig c = small_config();
  models::BertForSequenceClassification m(c, 2);
  optim::AdamW opt(m.parameters(), {.lr = 3e-3, .weight_decay = 0.0});
  std::mt19937_64 rng(5);
  auto batch = [&](int64_t B, std::vector<int64_t>& y) {
    std::vector<int64_t> ids, types;
    y.clear();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t a = 5 + int64_t(rng() % 5), same = int64_t(rng() % 2);
      const int64_t bb = same ? a : 5 + (a - 5 + 1 + int64_t(rng() % 4)) % 5;
      ids.insert(ids.end(), {2, a, 3, bb, 3});
      types.insert(types.end(), {0, 0, 0, 1, 1});
      y.push_back(same);
    }
    return std::pair{from_vector(ids, {B, 5}), from_vector(types, {B, 5})};
  };
  std::vector<int64_t> y;
  for (int step = 0; step < 600; ++step) {
    auto [ids, types] = batch(32, y);
    opt.zero_grad();
    Tensor loss = m.loss(m.forward(ids, types), from_vector(y, {32}));
    loss.backward();
    opt.step();
  }
  NoGradGuard ng;
  m.eval();
  auto [ids, types] = batch(200, y);
  const double acc = accuracy(m.forward(ids, types), y);
  MESSAGE("pair accuracy " << acc);
  CHECK(acc > 0.95);
}

TEST_CASE("bert heads: a tiny token classifier fits per-token labels, padding ignored") {
  manual_seed(12);
  models::BertForTokenClassification m(small_config(), 3);
  optim::AdamW opt(m.parameters(), {.lr = 3e-3, .weight_decay = 0.0});
  std::mt19937_64 rng(6);
  // Tokens 5..19, label = token % 3; rows of random length 2..6 padded with [PAD] (label -100).
  auto batch = [&](int64_t B, std::vector<int64_t>& y) {
    std::vector<int64_t> ids(size_t(B * 6), 0);
    y.assign(size_t(B * 6), -100);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = 2 + int64_t(rng() % 5);
      for (int64_t t = 0; t < len; ++t) {
        const int64_t id = 5 + int64_t(rng() % 15);
        ids[size_t(b * 6 + t)] = id, y[size_t(b * 6 + t)] = id % 3;
      }
    }
    return from_vector(ids, {B, 6});
  };
  std::vector<int64_t> y;
  for (int step = 0; step < 150; ++step) {
    Tensor ids = batch(16, y);
    opt.zero_grad();
    m.loss(m.forward(ids, zeros({16, 6}, DType::i64)), from_vector(y, {16, 6})).backward();
    opt.step();
  }
  NoGradGuard ng;
  m.eval();
  Tensor ids = batch(100, y);
  CHECK(accuracy(m.forward(ids, zeros({100, 6}, DType::i64)), y) > 0.95);
}
