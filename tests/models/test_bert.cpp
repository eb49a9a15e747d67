// BERT model: named configs, Hugging Face-style parameter names, tied MLM decoder, shapes,
// bad input, and MLM+NSP loss decreasing on a toy corpus built by data/bert_pretraining.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "data/bert_pretraining.h"
#include "models/bert.h"
#include "nn/optim.h"
#include "ops/error.h"
#include "ops/random.h"

using namespace graft;

namespace {

struct Batch { Tensor ids, types, labels, nsp; };

Batch make_batch(const std::vector<data::BertExample>& ex, size_t start, size_t n) {
  size_t T = 0;
  for (size_t k = 0; k < n; ++k) T = std::max(T, ex[(start + k) % ex.size()].input_ids.size());
  std::vector<int64_t> ids(n * T, 0), types(n * T, 0), labels(n * T, -100), nsp(n);
  for (size_t k = 0; k < n; ++k) {
    const auto& e = ex[(start + k) % ex.size()];
    std::copy(e.input_ids.begin(), e.input_ids.end(), ids.begin() + std::ptrdiff_t(k * T));
    std::copy(e.token_type_ids.begin(), e.token_type_ids.end(), types.begin() + std::ptrdiff_t(k * T));
    std::copy(e.labels.begin(), e.labels.end(), labels.begin() + std::ptrdiff_t(k * T));
    nsp[k] = e.next_sentence_label;
  }
  Shape s = {int64_t(n), int64_t(T)};
  return {from_vector(ids, s), from_vector(types, s), from_vector(labels, s),
          from_vector(nsp, {int64_t(n)})};
}

}  // namespace

TEST_CASE("bert model: named configs and parameter names") {
  auto base = models::BertConfig::named("base");
  CHECK(base.num_layers == 12);
  CHECK(base.hidden_size == 768);
  CHECK(base.num_heads == 12);
  CHECK(base.intermediate_size == 3072);
  CHECK(models::BertConfig::named("mini").hidden_size == 256);
  CHECK(models::BertConfig::named("large").num_layers == 24);
  CHECK_THROWS_AS(models::BertConfig::named("huge"), Error);
  models::BertForPreTraining m(models::BertConfig::named("tiny", 100));
  std::set<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.insert(name);
  for (const char* n : {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                        "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
                        "pooler.dense.weight", "cls.predictions.transform.dense.weight",
                        "cls.predictions.transform.LayerNorm.bias", "cls.predictions.bias",
                        "cls.seq_relationship.weight"})
    CHECK_MESSAGE(names.count(n) == 1, n);
  // The decoder is tied: no separate [V, C] output matrix.
  int64_t vc = 0;
  for (const auto& [name, p] : m.named_parameters())
    vc += p.dim() == 2 && p.size(0) == 100 && p.size(1) == 128;
  CHECK(vc == 1);
}

TEST_CASE("bert model: shapes, masked-only MLM logits, bad input") {
  models::BertConfig c = models::BertConfig::named("tiny", 50);
  c.hidden_size = 32; c.num_heads = 2; c.intermediate_size = 64; c.max_position_embeddings = 16;
  models::BertForPreTraining m(c);
  Tensor ids = from_vector(std::vector<int64_t>{2, 7, 8, 3, 9, 3, 0, 0, 2, 10, 11, 3, 12, 13, 3, 0},
                           {2, 8});
  Tensor types = from_vector(std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0}, {2, 8});
  Tensor labels = full({2, 8}, -100.0, DType::i64);
  std::vector<int64_t> lab(16, -100);
  lab[1] = 7; lab[12] = 12; lab[13] = 13;
  labels = from_vector(lab, {2, 8});
  auto out = m.loss(ids, types, labels, from_vector(std::vector<int64_t>{0, 1}, {2}));
  CHECK(out.mlm_logits.shape() == Shape{3, 50});
  CHECK(out.nsp_logits.shape() == Shape{2, 2});
  CHECK(m.encode(ids, types).shape() == Shape{2, 8, 32});
  out.loss.backward();
  CHECK(m.word_embeddings->weight.grad().defined());
  CHECK(m.mlm_bias.grad().defined());
  CHECK_THROWS_AS(m.encode(ids, types.narrow(1, 0, 4)), Error);
  CHECK_THROWS_AS(m.encode(full({1, 17}, 5.0, DType::i64), full({1, 17}, 0.0, DType::i64)), Error);
  CHECK_THROWS_AS(m.loss(ids, types, full({2, 8}, -100.0, DType::i64),
                         from_vector(std::vector<int64_t>{0, 1}, {2})), Error);
  CHECK_THROWS_AS(m.loss(ids, types, labels, from_vector(std::vector<int64_t>{0}, {1})), Error);
}

TEST_CASE("bert model: MLM + NSP loss decreases on a toy corpus") {
  // Documents are arithmetic runs of tokens, so masked tokens follow from their neighbours and
  // a random next sentence breaks the run.
  const int64_t V = 5 + 24;
  std::vector<std::string> toks = data::WordPieceTokenizer::special_tokens();
  for (int64_t k = 0; k < 24; ++k) toks.push_back(std::string(1, 't').append(std::to_string(k)));
  data::WordPieceTokenizer tok(toks);
  std::vector<data::TokenizedDocument> docs;
  for (int64_t d = 0; d < 24; ++d) {
    data::TokenizedDocument doc;
    int64_t step = 1 + d % 3, at = d;
    for (int64_t s = 0; s < 6; ++s) {
      std::vector<int64_t> sent;
      for (int64_t k = 0; k < 4; ++k, at += step) sent.push_back(5 + at % 24);
      doc.push_back(sent);
    }
    docs.push_back(doc);
  }
  data::BertPretrainingOptions o;
  o.max_seq_len = 20;
  o.dupe_factor = 8;
  auto ex = data::create_pretraining_examples(docs, tok, o);
  REQUIRE(ex.size() >= 64);
  models::BertConfig c;
  c.vocab_size = V; c.hidden_size = 32; c.num_layers = 2; c.num_heads = 2;
  c.intermediate_size = 64; c.max_position_embeddings = 32; c.dropout = 0;
  manual_seed(3);
  models::BertForPreTraining m(c);
  optim::AdamW opt(m.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  double first = 0, last = 0, mlm_first = 0, mlm_last = 0;
  const int steps = 300;
  for (int s = 0; s < steps; ++s) {
    Batch b = make_batch(ex, size_t(s) * 16, 16);
    auto out = m.loss(b.ids, b.types, b.labels, b.nsp);
    opt.zero_grad();
    out.loss.backward();
    opt.step();
    double l = out.loss.item<double>();
    double lm = out.mlm_loss.item<double>();
    if (s < 5) { first += l / 5; mlm_first += lm / 5; }
    if (s >= steps - 5) { last += l / 5; mlm_last += lm / 5; }
  }
  CAPTURE(first);
  CAPTURE(last);
  CAPTURE(mlm_first);
  CAPTURE(mlm_last);
  CHECK(last < 0.75 * first);
  CHECK(mlm_last < 0.7 * mlm_first);
}

TEST_CASE("bert model: [PAD] positions do not change the other hidden states") {
  models::BertConfig c;
  c.vocab_size = 40; c.hidden_size = 32; c.num_layers = 2; c.num_heads = 4;
  c.intermediate_size = 64; c.max_position_embeddings = 16;
  models::BertForPreTraining m(c);
  m.eval();
  std::vector<int64_t> ids = {2, 9, 10, 11, 3, 12, 13, 3};
  Tensor short_h = m.encode(from_vector(ids, {1, 8}), full({1, 8}, 0.0, DType::i64));
  ids.insert(ids.end(), 4, 0);
  Tensor long_h = m.encode(from_vector(ids, {1, 12}), full({1, 12}, 0.0, DType::i64));
  auto a = short_h.contiguous().to_vector<double>();
  auto b = long_h.narrow(1, 0, 8).contiguous().to_vector<double>();
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]));
  CHECK(worst < 1e-5);
}
