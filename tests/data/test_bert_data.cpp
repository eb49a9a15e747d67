// BERT pretraining data: sentence/document splitting, pair construction (layout, segment ids,
// lengths, next-sentence labels checked against the source documents), 80/10/10 masking
// proportions within binomial tolerances, labels = original ids, specials never selected,
// determinism.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "data/bert_pretraining.h"
#include "data/wordpiece.h"
#include "ops/error.h"

using namespace graft;
using namespace graft::data;

namespace {

// Specials plus "w0".."w{n-1}": token id of "wK" is 5 + K.
WordPieceTokenizer word_vocab(int64_t n) {
  std::vector<std::string> v = WordPieceTokenizer::special_tokens();
  for (int64_t k = 0; k < n; ++k) v.push_back(std::string(1, 'w').append(std::to_string(k)));
  return WordPieceTokenizer(v);
}

// n_docs documents of n_sent sentences of len tokens; ids are consecutive from 5 and each is
// used once, so (document, sentence) = ((id - 5) / (n_sent * len), (id - 5) % (n_sent * len) / len).
std::vector<TokenizedDocument> synthetic_docs(int64_t n_docs, int64_t n_sent, int64_t len) {
  std::vector<TokenizedDocument> docs;
  int64_t next = 5;
  for (int64_t d = 0; d < n_docs; ++d) {
    TokenizedDocument doc;
    for (int64_t s = 0; s < n_sent; ++s) {
      std::vector<int64_t> sent;
      for (int64_t k = 0; k < len; ++k) sent.push_back(next++);
      doc.push_back(sent);
    }
    docs.push_back(doc);
  }
  return docs;
}

}  // namespace

TEST_CASE("bert data: documents and sentences") {
  auto docs = split_documents("First doc. Second sentence!\nThird line\n\n  \nNext doc? Yes.\n");
  REQUIRE(docs.size() == 2);
  CHECK(split_sentences(docs[0]) ==
        std::vector<std::string>{"First doc.", "Second sentence!", "Third line"});
  CHECK(split_sentences("He said \"stop.\" Then 3.5 left (really.) End") ==
        std::vector<std::string>{"He said \"stop.\"", "Then 3.5 left (really.)", "End"});
  auto tok = WordPieceTokenizer::train({"first doc second sentence third line next yes"}, 200);
  auto tdocs = tokenize_documents(docs, tok);
  REQUIRE(tdocs.size() == 2);
  CHECK(tdocs[0].size() == 3);
  CHECK(tdocs[1].size() == 2);
  CHECK(tdocs[1][1] == tok.encode("Yes."));
}

TEST_CASE("bert data: masking selects 15% of non-special tokens, 80/10/10, labels are originals") {
  auto tok = word_vocab(2000);
  BertPretrainingOptions o;
  o.max_predictions = 0;
  std::mt19937_64 rng(7);
  int64_t selected = 0, masked = 0, random = 0, kept = 0;
  const int64_t n_seq = 3000, n_body = 40;
  for (int64_t s = 0; s < n_seq; ++s) {
    std::vector<int64_t> ids = {tok.cls_id()};
    for (int64_t k = 0; k < n_body; ++k) ids.push_back(5 + (s * 41 + k) % 2000);
    ids.push_back(tok.sep_id());
    ids.push_back(tok.pad_id());
    ids.push_back(tok.pad_id());
    const std::vector<int64_t> orig = ids;
    std::vector<int64_t> labels = mask_tokens(ids, tok, o, rng);
    REQUIRE(labels.size() == ids.size());
    int64_t here = 0;
    for (size_t p = 0; p < ids.size(); ++p) {
      if (labels[p] == kIgnoreIndex) {
        CHECK(ids[p] == orig[p]);  // unselected positions untouched
        continue;
      }
      ++here;
      CHECK(labels[p] == orig[p]);
      CHECK_FALSE((orig[p] == tok.cls_id() || orig[p] == tok.sep_id() || orig[p] == tok.pad_id()));
      if (ids[p] == tok.mask_id()) ++masked;
      else if (ids[p] == orig[p]) ++kept;
      else { ++random; CHECK_FALSE(tok.is_special(ids[p])); }
    }
    CHECK(here == 6);  // round(0.15 * 40)
    selected += here;
  }
  REQUIRE(selected == n_seq * 6);
  // Each selected token is [MASK] w.p. 0.8, random w.p. 0.1 (equal to the original w.p. 1/2000),
  // unchanged otherwise: 4.5 binomial standard deviations.
  auto near = [&](int64_t count, double p) {
    double sd = std::sqrt(double(selected) * p * (1 - p));
    CAPTURE(count);
    CAPTURE(p * double(selected));
    CHECK(std::abs(double(count) - p * double(selected)) < 4.5 * sd);
  };
  near(masked, 0.8);
  near(random, 0.1 * (1 - 1.0 / 2000));
  near(kept, 0.1 + 0.1 / 2000);
  // Selection is uniform over positions: each of the 40 body positions is picked ~15% of times.
  std::mt19937_64 rng2(9);
  std::vector<int64_t> hits(n_body + 2, 0);
  for (int64_t s = 0; s < n_seq; ++s) {
    std::vector<int64_t> ids = {tok.cls_id()};
    for (int64_t k = 0; k < n_body; ++k) ids.push_back(5 + k);
    ids.push_back(tok.sep_id());
    auto labels = mask_tokens(ids, tok, o, rng2);
    for (size_t p = 0; p < labels.size(); ++p) hits[p] += labels[p] != kIgnoreIndex;
  }
  CHECK(hits.front() == 0);
  CHECK(hits.back() == 0);
  double sd = std::sqrt(double(n_seq) * 0.15 * 0.85);
  for (int64_t k = 1; k <= n_body; ++k) CHECK(std::abs(double(hits[size_t(k)]) - 0.15 * n_seq) < 4.5 * sd);
  o.max_predictions = 3;
  std::vector<int64_t> ids(50, 7);
  auto labels = mask_tokens(ids, tok, o, rng);
  CHECK(std::count_if(labels.begin(), labels.end(), [](int64_t l) { return l != kIgnoreIndex; }) == 3);
  o.mask_token_prob = 0.95;
  CHECK_THROWS_AS(mask_tokens(ids, tok, o, rng), Error);  // 0.95 + 0.1 > 1
  o.mask_token_prob = 0.8;
  auto specials_only = WordPieceTokenizer(WordPieceTokenizer::special_tokens());
  CHECK_THROWS_AS(mask_tokens(ids, specials_only, o, rng), Error);
}

TEST_CASE("bert data: sentence pairs, segment ids, truncation and next-sentence labels") {
  auto tok = word_vocab(4000);
  auto docs = synthetic_docs(30, 12, 7);  // every id appears once: (doc, sentence) = f(id)
  auto where = [&](int64_t id) { return std::pair<int64_t, int64_t>{(id - 5) / 84, (id - 5) % 84 / 7}; };
  BertPretrainingOptions o;
  o.max_seq_len = 40;
  o.mask_prob = 0;  // check the pair structure on clean ids
  o.dupe_factor = 4;
  auto ex = create_pretraining_examples(docs, tok, o);
  REQUIRE(ex.size() > 200);
  int64_t random_next = 0;
  for (const BertExample& e : ex) {
    REQUIRE(e.input_ids.size() == e.token_type_ids.size());
    REQUIRE(e.labels.size() == e.input_ids.size());
    CHECK(int64_t(e.input_ids.size()) <= o.max_seq_len);
    CHECK(e.input_ids.front() == tok.cls_id());
    CHECK(e.input_ids.back() == tok.sep_id());
    size_t sep = size_t(std::find(e.input_ids.begin() + 1, e.input_ids.end(), tok.sep_id()) -
                        e.input_ids.begin());
    REQUIRE(sep + 2 < e.input_ids.size());  // A and B both non-empty
    for (size_t p = 0; p < e.input_ids.size(); ++p) {
      CHECK(e.token_type_ids[p] == (p <= sep ? 0 : 1));
      CHECK(e.labels[p] == kIgnoreIndex);
    }
    // A comes from one document; B from the same document right after A (label 0) or from
    // another document (label 1).
    auto a_last = where(e.input_ids[sep - 1]), b_first = where(e.input_ids[sep + 1]);
    CHECK(where(e.input_ids[1]).first == a_last.first);
    if (e.next_sentence_label == 0) {
      CHECK(b_first.first == a_last.first);
      CHECK(b_first.second > a_last.second);  // A's sentences precede B's
    } else {
      CHECK(b_first.first != a_last.first);
      ++random_next;
    }
  }
  double frac = double(random_next) / double(ex.size());
  CHECK(frac > 0.35);
  CHECK(frac < 0.65);
  o.max_seq_len = 4;
  CHECK_THROWS_AS(create_pretraining_examples(docs, tok, o), Error);
}

TEST_CASE("bert data: examples are deterministic in the seed and masked with the specials kept") {
  auto tok = word_vocab(4000);
  auto docs = synthetic_docs(10, 8, 5);
  BertPretrainingOptions o;
  o.max_seq_len = 32;
  auto a = create_pretraining_examples(docs, tok, o), b = create_pretraining_examples(docs, tok, o);
  o.seed += 1;
  auto c = create_pretraining_examples(docs, tok, o);
  REQUIRE(a.size() == b.size());
  bool differs = a.size() != c.size();
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].input_ids == b[k].input_ids);
    CHECK(a[k].labels == b[k].labels);
    CHECK(a[k].next_sentence_label == b[k].next_sentence_label);
    if (k < c.size() && a[k].input_ids != c[k].input_ids) differs = true;
    for (size_t p = 0; p < a[k].input_ids.size(); ++p) {
      bool special = a[k].input_ids[p] == tok.cls_id() || a[k].input_ids[p] == tok.sep_id();
      if (special) CHECK(a[k].labels[p] == kIgnoreIndex);
    }
    CHECK(std::count(a[k].labels.begin(), a[k].labels.end(), kIgnoreIndex) <
          int64_t(a[k].labels.size()));
  }
  CHECK(differs);
}
