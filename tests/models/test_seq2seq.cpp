// models::Seq2Seq and decoding: beam search against greedy and on a crafted decoder where it
// must beat greedy, batching/padding invariance, every cell x attention kind trains, a tiny
// reverse task learnt to high exact match, scheduled sampling, hard attention's REINFORCE
// gradients, checkpoints and bad inputs.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/batching.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "models/decoding.h"
#include "models/seq2seq.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "ops/error.h"

using namespace graft;
using namespace graft::models;
namespace fs = std::filesystem;

namespace {

// These models are tiny (B 32, H 64): one thread is several times faster than OpenMP teams
// that spin-wait, and on a loaded machine (2 cores, many processes) up to 25x faster.
const int kOneThread = (omp_set_num_threads(1), 1);

// A decoder whose next-token distribution is a table lookup on (sentence, prefix): the state
// of a row is its sentence id and the tokens fed so far, so reorder() must move both.
// Tokens: 4 = A, 5 = B. Sentence 0: P(A)=.6 P(B)=.4 first; after A: A .4, B .3, <eos> .3;
// after AA or B: <eos> .95. Greedy takes A A <eos> (p = .6*.4*.95 = .228), the best is
// B <eos> (p = .4*.95 = .38). Sentence 1 is the same with A and B swapped.
class TableDecoder : public IncrementalDecoder {
 public:
  explicit TableDecoder(int64_t batch) {
    for (int64_t b = 0; b < batch; ++b) rows_.push_back({b, {}});
  }
  Tensor step(const Tensor& prev) override {
    const auto p = prev.to_vector<int64_t>();
    REQUIRE(p.size() == rows_.size());
    std::vector<double> lp;
    for (size_t r = 0; r < rows_.size(); ++r) {
      Row& row = rows_[r];
      if (p[r] != data::kBos) row.prefix.push_back(p[r]);
      const bool swap = row.sentence % 2 == 1;
      const int64_t A = swap ? 5 : 4, B = swap ? 4 : 5;
      std::vector<double> pr(6, 1e-6);
      const auto& pre = row.prefix;
      if (pre.empty()) {
        pr[size_t(A)] = .6, pr[size_t(B)] = .4;
      } else if (pre.size() == 1 && pre[0] == A) {
        pr[size_t(A)] = .4, pr[size_t(B)] = .3, pr[data::kEos] = .3;
      } else {
        pr[data::kEos] = .95, pr[size_t(A)] = .025, pr[size_t(B)] = .025;
      }
      for (double v : pr) lp.push_back(std::log(v));
    }
    ++steps;
    return from_vector(lp, {int64_t(rows_.size()), 6}, DType::f64);
  }
  void reorder(const Tensor& index) override {
    std::vector<Row> next;
    for (int64_t i : index.to_vector<int64_t>()) next.push_back(rows_[size_t(i)]);
    rows_ = std::move(next);
  }
  int steps = 0;

 private:
  struct Row {
    int64_t sentence;
    std::vector<int64_t> prefix;
  };
  std::vector<Row> rows_;
};

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(a - b)).item(); }

Seq2SeqOptions small_options(const std::string& cell, const std::string& attention) {
  Seq2SeqOptions o;
  o.src_vocab = 14;
  o.tgt_vocab = 14;
  o.embed = 16;
  o.hidden = 24;
  o.cell = cell;
  o.attention = attention;
  o.window = 2;
  return o;
}

// Random source/target id sequences over ids 4..13.
std::vector<std::vector<int64_t>> random_seqs(int64_t n, int64_t lo, int64_t hi, uint64_t seed) {
  Generator g(seed);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = lo + int64_t(philox_uniform(g.seed, g.advance(1)) * double(hi - lo + 1));
    std::vector<int64_t> s;
    for (int64_t k = 0; k < len; ++k) s.push_back(4 + int64_t(philox_uniform(g.seed, g.advance(1)) * 10));
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("beam search beats greedy on a crafted decoder, batched over sentences") {
  TableDecoder g(2);
  const auto greedy = greedy_decode(g, 2, {.max_len = 10});
  CHECK(greedy[0].tokens == std::vector<int64_t>{4, 4});
  CHECK(greedy[1].tokens == std::vector<int64_t>{5, 5});
  CHECK(greedy[0].logp == doctest::Approx(std::log(.6 * .4 * .95)));
  TableDecoder b1(2);
  const auto beam1 = beam_search(b1, 2, {.beam = 1, .max_len = 10});
  for (int i = 0; i < 2; ++i) {
    CHECK(beam1[size_t(i)].tokens == greedy[size_t(i)].tokens);
    CHECK(beam1[size_t(i)].logp == doctest::Approx(greedy[size_t(i)].logp));
  }
  TableDecoder b2(2);
  const auto beam = beam_search(b2, 2, {.beam = 2, .max_len = 10, .length_penalty = 0});
  CHECK(beam[0].tokens == std::vector<int64_t>{5});
  CHECK(beam[1].tokens == std::vector<int64_t>{4});
  CHECK(beam[0].finished);
  CHECK(beam[0].logp == doctest::Approx(std::log(.4 * .95)));
  CHECK(beam[0].logp > greedy[0].logp);
  // max_len cuts hypotheses: with max_len 1 nothing finishes, the best live one is returned
  TableDecoder b3(1);
  const auto cut = beam_search(b3, 1, {.beam = 2, .max_len = 1});
  CHECK(cut[0].tokens == std::vector<int64_t>{4});
  CHECK_FALSE(cut[0].finished);
  TableDecoder bad(1);
  CHECK_THROWS_AS(beam_search(bad, 1, {.beam = 0}), Error);
  CHECK_THROWS_AS(greedy_decode(bad, 1, {.max_len = -1}), Error);
  CHECK_THROWS_AS(beam_search(bad, 1, {.length_penalty = -1}), Error);
  CHECK(normalized_score(-4.0, 4, 1.0) == doctest::Approx(-1.0));
  CHECK(normalized_score(-4.0, 4, 0.0) == doctest::Approx(-4.0));
}

namespace {
// Sentence s says token 4 + s % 3 until it has said 1 + (5 s) % 7 of them, then <eos>. Token 9
// is a worse second choice that counts as three, so greedy says the token L times while the
// beams also follow paths through 9 (which start as a second beam and may overtake the first). The sentence id is per-sentence state (like an encoder
// memory): only reorder() moves it, and reorder_beams() checks that it was given an index that
// stays inside each sentence's K rows. The prefix is per-row state: both move it.
class LengthDecoder : public IncrementalDecoder {
 public:
  LengthDecoder(std::vector<int64_t> sentences, int64_t K) : sentence_(std::move(sentences)), K_(K) {
    prefix_.resize(sentence_.size());
  }
  static int64_t token(int64_t s) { return 4 + s % 3; }
  static int64_t length(int64_t s) { return 1 + (5 * s) % 7; }
  Tensor step(const Tensor& prev) override {
    const auto p = prev.to_vector<int64_t>();
    REQUIRE(p.size() == sentence_.size());
    rows_seen.push_back(p.size());
    std::vector<double> lp;
    for (size_t r = 0; r < p.size(); ++r) {
      if (p[r] != data::kBos) prefix_[r].push_back(p[r]);
      std::vector<double> pr(10, 1e-4);
      const int64_t s = sentence_[r];
      const auto& q = prefix_[r];
      const bool more = std::count(q.begin(), q.end(), token(s)) + 3 * std::count(q.begin(), q.end(), 9) < length(s);
      pr[size_t(token(s))] = more ? .6 : .05;
      pr[9] = more ? .3 : .04;
      pr[data::kEos] = more ? .09 : .9;
      for (double v : pr) lp.push_back(std::log(v));
    }
    return from_vector(lp, {int64_t(p.size()), 10}, DType::f64);
  }
  void reorder(const Tensor& index) override {
    std::vector<int64_t> s;
    std::vector<std::vector<int64_t>> pre;
    for (int64_t i : index.to_vector<int64_t>()) {
      s.push_back(sentence_[size_t(i)]);
      pre.push_back(prefix_[size_t(i)]);
    }
    sentence_ = std::move(s);
    prefix_ = std::move(pre);
  }
  void reorder_beams(const Tensor& index) override {
    const auto idx = index.to_vector<int64_t>();
    REQUIRE(idx.size() == prefix_.size());
    std::vector<std::vector<int64_t>> pre;
    for (size_t i = 0; i < idx.size(); ++i) {
      REQUIRE(idx[i] / K_ == int64_t(i) / K_);  // inside the sentence's rows
      pre.push_back(prefix_[size_t(idx[i])]);
    }
    prefix_ = std::move(pre);
  }
  std::vector<size_t> rows_seen;  // rows fed at each step

 private:
  std::vector<int64_t> sentence_;
  std::vector<std::vector<int64_t>> prefix_;
  int64_t K_;
};
}  // namespace

TEST_CASE("decoding drops finished sentences' rows and gives each sentence its own output") {
  const int64_t B = 12;
  std::vector<int64_t> ids(B);
  for (int64_t b = 0; b < B; ++b) ids[size_t(b)] = b;
  LengthDecoder g(ids, 1);
  const auto greedy = greedy_decode(g, B, {.max_len = 20});
  for (int64_t b = 0; b < B; ++b) {
    INFO("sentence " << b);
    CHECK(greedy[size_t(b)].tokens ==
          std::vector<int64_t>(size_t(LengthDecoder::length(b)), LengthDecoder::token(b)));
    CHECK(greedy[size_t(b)].finished);
  }
  CHECK(g.rows_seen.front() == size_t(B));
  CHECK(g.rows_seen.back() < size_t(B) / 2);  // the long sentences ran on alone
  for (int64_t K : {2, 3}) {
    INFO("beam " << K);
    LengthDecoder d(ids, K);
    const auto beam = beam_search(d, B, {.beam = K, .max_len = 20, .length_penalty = 0});
    CHECK(d.rows_seen.front() == size_t(B * K));
    CHECK(d.rows_seen.back() < size_t(B * K) / 2);
    for (int64_t b = 0; b < B; ++b) {  // alone == in the batch
      INFO("sentence " << b);
      LengthDecoder one({b}, K);
      const auto alone = beam_search(one, 1, {.beam = K, .max_len = 20, .length_penalty = 0});
      CHECK(beam[size_t(b)].tokens == alone[0].tokens);
      CHECK(beam[size_t(b)].logp == doctest::Approx(alone[0].logp));
    }
  }
}

TEST_CASE("Seq2Seq: beam 1 equals greedy and padding does not change a sentence's output") {
  for (const std::string attn : {"none", "bahdanau", "general", "local-p"}) {
    INFO(attn);
    manual_seed(3);
    Seq2Seq m(small_options("gru", attn));
    const auto src = random_seqs(5, 2, 9, 17);
    const auto g = m.translate(src, {.beam = 1, .max_len = 12, .length_penalty = 0});
    data::Seq2SeqBatch b = data::make_seq2seq_batch(src);
    NoGradGuard ng;
    m.eval();
    auto dec = m.decoder(b.src, b.src_lengths);
    const auto beam1 = beam_search(*dec, b.size(), {.beam = 1, .max_len = 12, .length_penalty = 0});
    const auto beam4 = m.translate(src, {.beam = 4, .max_len = 12, .length_penalty = 0});
    for (size_t i = 0; i < src.size(); ++i) {
      CHECK(beam1[i].tokens == g[i].tokens);
      CHECK(beam1[i].logp == doctest::Approx(g[i].logp).epsilon(1e-5));
      CHECK(beam4[i].score >= g[i].score - 1e-5);  // a wider beam never scores worse here
      // alone (no padding) == inside the padded batch
      const auto alone = m.translate({src[i]}, {.beam = 1, .max_len = 12, .length_penalty = 0});
      CHECK(alone[0].tokens == g[i].tokens);
      CHECK(alone[0].logp == doctest::Approx(g[i].logp).epsilon(1e-4));
    }
  }
}

TEST_CASE("Seq2Seq: every cell and attention kind trains (loss falls, gradients finite)") {
  const auto src = random_seqs(16, 2, 6, 5);
  std::vector<std::vector<int64_t>> tgt;
  for (const auto& s : src) tgt.emplace_back(s.rbegin(), s.rend());
  const data::Seq2SeqBatch b = data::make_seq2seq_batch(src, tgt);
  std::vector<std::string> kinds = {"none"};
  for (const auto& k : nn::attention_names()) kinds.push_back(k);
  for (const std::string cell : {"rnn", "lstm", "gru"})
    for (const std::string& attn : kinds) {
      if (cell != "lstm" && attn != "none" && attn != "bahdanau" && attn != "dot") continue;
      INFO(cell << " + " << attn);
      manual_seed(1);
      Seq2SeqOptions o = small_options(cell, attn);
      o.bidirectional = attn == "general";
      o.layers = attn == "concat" ? 2 : 1;
      o.doubly_stochastic = attn == "bahdanau" ? 0.1 : 0.0;
      Seq2Seq m(o);
      optim::Adam opt(m.parameters(), {.lr = 0.02});
      double first = 0, last = 0;
      for (int s = 0; s < 25; ++s) {
        opt.zero_grad();
        LossOutput l = m.loss(b);
        l.loss.backward();
        if (s == 0) first = l.nll;
        last = l.nll;
        for (const auto& [name, p] : m.named_parameters())
          if (p.grad().defined()) {
            const double n = sum(square(p.grad())).item();
            if (!std::isfinite(n)) FAIL("non-finite gradient in " << name);
          }
        opt.step();
      }
      CHECK(std::isfinite(last));
      CHECK(last < 0.8 * first);
    }
}

TEST_CASE("Seq2Seq: fast paths (precomputed keys, batched W_c/W_out, fused scores) equal the step-by-step path to 1e-12 in float64") {
  const auto src = random_seqs(5, 2, 6, 21);  // padded sources (mask exercised)
  std::vector<std::vector<int64_t>> tgt;
  for (const auto& s : src) tgt.emplace_back(s.rbegin(), s.rend());
  const data::Seq2SeqBatch b = data::make_seq2seq_batch(src, tgt);
  struct Kind {
    std::string cell, attn;
    bool feeding;
  };
  for (const Kind& k : std::vector<Kind>{{"lstm", "none", true}, {"lstm", "bahdanau", true},
                                         {"gru", "bahdanau", true}, {"lstm", "hard", true},
                                         {"lstm", "general", true}, {"lstm", "general", false},
                                         {"lstm", "concat", true}, {"rnn", "concat", false},
                                         {"lstm", "dot", true}, {"lstm", "local-p", false}}) {
    INFO(k.cell << " + " << k.attn << (k.feeding ? "" : " (no input feeding)"));
    manual_seed(3);
    Seq2SeqOptions o = small_options(k.cell, k.attn);
    o.input_feeding = k.feeding;
    o.layers = k.attn == "bahdanau" && k.cell == "lstm" ? 2 : 1;
    Seq2Seq m(o);
    m.to(DType::f64);
    if (k.attn == "hard") m.eval();  // the expectation: no sampling, no REINFORCE state
    auto run = [&](bool fast) {
      m.fast_paths = fast;
      if (m.attention) m.attention->use_fused = fast;
      m.zero_grad();
      LossOutput l = m.loss(b);
      l.loss.backward();
      std::vector<Tensor> flat{l.loss.reshape({1})};
      for (const Tensor& p : m.parameters()) flat.push_back(p.grad().defined() ? p.grad().flatten() : zeros_like(p).flatten());
      return cat(flat, 0);
    };
    Tensor fast = run(true), plain = run(false);
    REQUIRE(fast.numel() == plain.numel());
    CHECK(max_abs_diff(fast, plain) < 1e-12);
    CHECK(sum(square(fast)).item() > 0);  // gradients reached the parameters
  }
}

TEST_CASE("Seq2Seq: beam search with the precomputed key projection (reordered with the beams) equals the plain path") {
  for (const std::string attn : {"bahdanau", "general"}) {
    INFO(attn);
    manual_seed(4);
    Seq2Seq m(small_options("lstm", attn));
    m.to(DType::f64);
    const auto src = random_seqs(4, 2, 7, 22);
    DecodeOptions d{.beam = 3, .max_len = 8};
    m.fast_paths = true;
    auto fast = m.translate(src, d);
    m.fast_paths = false;
    auto plain = m.translate(src, d);
    REQUIRE(fast.size() == plain.size());
    for (size_t i = 0; i < fast.size(); ++i) {
      CHECK(fast[i].tokens == plain[i].tokens);
      CHECK(std::abs(fast[i].logp - plain[i].logp) < 1e-10);
    }
  }
}

TEST_CASE("Seq2Seq: a tiny reverse task reaches high exact match in a few hundred steps") {
  data::TaskOptions to{.min_len = 3, .max_len = 5, .num_symbols = 10};
  const data::TaskSplit split = data::make_task_split("reverse", 2000, 200, 0, to, 3, 5, 7);
  std::vector<std::string> texts;
  for (const auto& e : split.train) texts.push_back(e.source);
  const data::CharTokenizer tok = data::CharTokenizer::fit(texts);
  auto ids = [&](const std::vector<data::Example>& ex, bool target) {
    std::vector<std::vector<int64_t>> out;
    for (const auto& e : ex) out.push_back(tok.encode(target ? e.target : e.source));
    return out;
  };
  const auto xs = ids(split.train, false), ys = ids(split.train, true);
  manual_seed(2);
  Seq2SeqOptions o;
  o.src_vocab = o.tgt_vocab = tok.vocab().size();
  o.embed = 32;
  o.hidden = 64;
  o.cell = "lstm";
  o.attention = "bahdanau";
  Seq2Seq m(o);
  optim::Adam opt(m.parameters(), {.lr = 0.01});
  Generator batches(3);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t step = 0;
  while (step < 400) {
    for (const auto& idx : data::bucket_batches(std::vector<int64_t>(xs.size(), 1), 32, batches, 1)) {
      std::vector<std::vector<int64_t>> bx, by;
      for (int64_t i : idx) bx.push_back(xs[size_t(i)]), by.push_back(ys[size_t(i)]);
      opt.zero_grad();
      m.loss(data::make_seq2seq_batch(bx, by)).loss.backward();
      opt.step();
      if (++step == 400) break;
    }
  }
  const auto hyps = m.translate(ids(split.valid, false), {.beam = 1, .max_len = 8});
  std::vector<std::vector<int64_t>> outs;
  for (const auto& h : hyps) outs.push_back(h.tokens);
  const Accuracy acc = sequence_accuracy(outs, ids(split.valid, true));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE(fmt::format("reverse 3-5, LSTM + Bahdanau, 400 steps of 32: exact {:.3f}, token {:.3f}, {:.1f} s",
                      acc.exact, acc.token, secs));
  CHECK(acc.exact >= 0.9);
}

TEST_CASE("Seq2Seq: scheduled sampling feeds the model's own predictions, seeded") {
  manual_seed(4);
  Seq2Seq m(small_options("lstm", "bahdanau"));
  const auto src = random_seqs(6, 3, 6, 9);
  const data::Seq2SeqBatch b = data::make_seq2seq_batch(src, src);
  NoGradGuard ng;
  const Tensor tf = m.forward_logits(b, 0.0);
  Generator g1(8), g2(8);
  const Tensor s1 = m.forward_logits(b, 1.0, &g1), s2 = m.forward_logits(b, 1.0, &g2);
  CHECK(s1.to_vector<float>() == s2.to_vector<float>());
  const Tensor d = amax(abs(s1 - tf));
  CHECK(d.item() > 1e-4);
  // step 0 always gets the gold <bos>: identical logits there
  CHECK(amax(abs(s1.select(1, 0) - tf.select(1, 0))).item() < 1e-6);
  m.eval();  // no sampling in eval mode
  CHECK(amax(abs(m.forward_logits(b, 1.0, &g1) - tf)).item() < 1e-6);
  CHECK_THROWS_AS(m.forward_logits(b, 1.5), Error);
}

TEST_CASE("Seq2Seq: hard attention trains its scorer through REINFORCE") {
  manual_seed(5);
  Seq2Seq m(small_options("lstm", "hard"));
  const auto src = random_seqs(8, 3, 6, 10);
  const data::Seq2SeqBatch b = data::make_seq2seq_batch(src, src);
  LossOutput l = m.loss(b);
  l.loss.backward();
  auto* h = dynamic_cast<nn::HardAttention*>(m.attention.get());
  REQUIRE(h != nullptr);
  // the sampled context is not differentiable w.r.t. the scores: only REINFORCE reaches v, W
  REQUIRE(h->v.grad().defined());
  CHECK(sum(abs(h->v.grad())).item() > 0);
  CHECK(sum(abs(h->W->weight.grad())).item() > 0);
  CHECK(l.loss.item() != doctest::Approx(l.nll));  // the REINFORCE term is there
  m.eval();
  const auto out = m.translate(src, {.beam = 2, .max_len = 8});
  CHECK(out.size() == src.size());
}

TEST_CASE("Seq2Seq: attention matrix rows are distributions over the source") {
  manual_seed(6);
  Seq2Seq m(small_options("lstm", "concat"));
  const std::vector<int64_t> src = {5, 6, 7, 8}, out = {9, 10};
  const Tensor a = m.attention_matrix(src, out);
  REQUIRE(a.shape() == Shape{3, 4});  // 2 tokens + <eos>
  for (int64_t t = 0; t < 3; ++t) CHECK(sum(a.select(0, t)).item() == doctest::Approx(1.0).epsilon(1e-5));
  Seq2Seq plain(small_options("lstm", "none"));
  CHECK_THROWS_AS(plain.attention_matrix(src, out), Error);
}

TEST_CASE("Seq2Seq: checkpoint save/load round trip and mismatches") {
  const std::string path =
      (fs::temp_directory_path() / fmt::format("graft_s2s_{}.safetensors", ::getpid())).string();
  Seq2SeqOptions o = small_options("lstm", "local-m");
  o.layers = 2;
  manual_seed(7);
  Seq2Seq a(o);
  nn::save_safetensors(path, a.state_dict(), {{"seq2seq", o.to_json()}});
  const auto f = nn::load_safetensors(path);
  const Seq2SeqOptions o2 = Seq2SeqOptions::from_json(f.metadata.at("seq2seq"));
  CHECK(o2.to_json() == o.to_json());
  manual_seed(8);
  Seq2Seq b(o2);
  const auto src = random_seqs(4, 2, 7, 11);
  CHECK(a.translate(src, {.max_len = 9})[1].logp != b.translate(src, {.max_len = 9})[1].logp);
  nn::load_into(b, path);
  const auto ha = a.translate(src, {.beam = 3, .max_len = 9}), hb = b.translate(src, {.beam = 3, .max_len = 9});
  for (size_t i = 0; i < src.size(); ++i) {
    CHECK(ha[i].tokens == hb[i].tokens);
    CHECK(ha[i].logp == doctest::Approx(hb[i].logp));
  }
  Seq2SeqOptions other = o;
  other.hidden = 32;
  Seq2Seq c(other);
  CHECK_THROWS_AS(nn::load_into(c, path), Error);
  fs::remove(path);
}

TEST_CASE("Seq2Seq: bad options and inputs raise graft::Error") {
  Seq2SeqOptions o = small_options("lstm", "bahdanau");
  auto with = [&](auto f) {
    Seq2SeqOptions x = o;
    f(x);
    return x;
  };
  CHECK_THROWS_AS(Seq2Seq(with([](auto& x) { x.cell = "transformer"; })), Error);
  CHECK_THROWS_AS(Seq2Seq(with([](auto& x) { x.attention = "magic"; })), Error);
  CHECK_THROWS_AS(Seq2Seq(with([](auto& x) { x.src_vocab = 3; })), Error);
  CHECK_THROWS_AS(Seq2Seq(with([](auto& x) { x.hidden = 7, x.bidirectional = true; })), Error);
  CHECK_THROWS_AS(Seq2Seq(with([](auto& x) { x.dropout = 1.0; })), Error);
  CHECK_THROWS_AS(Seq2SeqOptions::from_json("{\"hidden\": \"big\"}"), Error);
  CHECK_THROWS_AS(Seq2SeqOptions::from_json("{\"hiden\": 3}"), Error);
  CHECK_THROWS_AS(Seq2SeqOptions::from_json("not json"), Error);
  Seq2Seq m(o);
  CHECK_THROWS_AS(m.translate({{4, 99}}, {}), Error);  // id beyond src_vocab
  CHECK_THROWS_AS(m.translate({{4, -1}}, {}), Error);
  CHECK_THROWS_AS(m.translate({{}}, {}), Error);        // empty source
  CHECK_THROWS_AS(m.translate({{4}}, {.beam = 0}), Error);
  const data::Seq2SeqBatch b = data::make_seq2seq_batch({{4, 5}}, {{4, 50}});
  CHECK_THROWS_AS(m.loss(b), Error);  // target id beyond tgt_vocab
  CHECK_THROWS_AS(m.encode(from_vector(std::vector<int64_t>{4, 5}, {1, 2}),
                           from_vector(std::vector<int64_t>{3}, {1})), Error);  // length > S
  CHECK_THROWS_AS(m.encode(zeros({1, 2}), from_vector(std::vector<int64_t>{2}, {1})), Error);
  CHECK_THROWS_AS(sequence_accuracy({{1}}, {}), Error);
}
