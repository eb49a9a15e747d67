// What `graft train seq2seq` and `graft train transformer` (and their `graft translate`)
// share: the tokenizers, fitted on the training sentences, saved as src_vocab.txt /
// tgt_vocab.txt in the run directory and loaded back for translation; the encoding of data
// sets and input lines; each rank's micro-batch; --target and the head of results.json;
// decoding in batches; the attention heatmap of a translation.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/tensor.h"
#include "data/batching.h"
#include "data/parallel_corpus.h"
#include "data/sentencepiece.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "models/decoding.h"
#include "nn/distributed.h"
#include "nn/trainer.h"
#include "tools/heatmap.h"
#include "tools/plot.h"
#include "tools/train_device.h"
#include "tools/train_flags.h"

namespace graft::tools {

using Ids = std::vector<std::vector<int64_t>>;

// The data flags of `graft train seq2seq` and `graft train transformer` (a command sets its
// own defaults where they differ).
struct SeqTaskFlags {
  std::string task = "date";
  std::string data_dir = "datasets";
  std::string tsv_train, tsv_valid, tsv_test;  // --task tsv
  int64_t train_size = 20000, valid_size = 500, test_size = 1000, eval_size = 500;
  int64_t min_len = 3, max_len = 10, symbols = 10;
};

// Their entries in the run's config.json, by long name.
inline void add_task_config(nlohmann::ordered_json& j, const SeqTaskFlags& t) {
  j["task"] = t.task;
  j["data-dir"] = t.data_dir;
  j["tsv-train"] = t.tsv_train;
  j["tsv-valid"] = t.tsv_valid;
  j["tsv-test"] = t.tsv_test;
  j["train-size"] = t.train_size;
  j["valid-size"] = t.valid_size;
  j["test-size"] = t.test_size;
  j["eval-size"] = t.eval_size;
  j["min-len"] = t.min_len;
  j["max-len"] = t.max_len;
  j["symbols"] = t.symbols;
}

// The flags both commands describe alike: --task, --valid-size, --test-size, --eval-size,
// --symbols, --data-dir, --tsv-train, --tsv-test (--train-size, --min-len and --max-len differ
// per command).
inline void add_task_flags(CLI::App* c, SeqTaskFlags& t) {
  const auto count = CLI::Range(int64_t(1), int64_t(1) << 40);
  c->add_option("--task", t.task, "copy, reverse, sort, date (synthetic), bible (after 'graft data prepare bible-en-es') or tsv")->capture_default_str()->check(CLI::IsMember({"copy", "reverse", "sort", "date", "bible", "tsv"}));
  c->add_option("--valid-size", t.valid_size, "Validation pairs")->capture_default_str()->check(count);
  c->add_option("--test-size", t.test_size, "Held-out test pairs")->capture_default_str()->check(count);
  c->add_option("--eval-size", t.eval_size, "Validation pairs decoded at each evaluation")->capture_default_str()->check(count);
  c->add_option("--symbols", t.symbols, "copy/reverse/sort alphabet size (2..36)")->capture_default_str()->check(CLI::Range(int64_t(2), int64_t(36)));
  c->add_option("--data-dir", t.data_dir, "Where 'graft data prepare' wrote the corpora")->capture_default_str();
  c->add_option("--tsv-train", t.tsv_train, "--task tsv: training file (source<TAB>target)");
  c->add_option("--tsv-valid", t.tsv_valid, "--task tsv: validation file (default: the last --valid-size pairs of --tsv-train, held out of training)");
  c->add_option("--tsv-test", t.tsv_test, "--task tsv: test file");
}

// The batch and vocabulary flags both commands take: --batch, --max-tokens, --tokenizer and
// --vocab-size, their config.json entries and their checks.
struct SeqBatchFlags {
  int64_t batch = 64;
  int64_t max_tokens = 0;  // > 0: token batches instead of --batch sentences
  std::string tokenizer = "word";  // corpora: word, char or sentencepiece
  int64_t vocab_size = 8000;
};
inline void add_batch_config(nlohmann::ordered_json& j, const SeqBatchFlags& b) {
  j["batch"] = b.batch;
  j["max-tokens"] = b.max_tokens;
  j["tokenizer"] = b.tokenizer;
  j["vocab-size"] = b.vocab_size;
}
// batch_help: what --batch counts, e.g. "Sentences per step (bucketed by length)".
inline void add_batch_flags(CLI::App* c, SeqBatchFlags& b, const char* batch_help) {
  c->add_option("--batch", b.batch, batch_help)->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(100000)));
  c->add_option("--max-tokens", b.max_tokens, "Token batches instead of --batch: each step holds at most this many padded tokens, sentences x max(source, target + 1) (fairseq's --max-tokens; 0 = off)")->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  c->add_option("--tokenizer", b.tokenizer, "Corpora: word (lowercased, punctuation split), char, or sentencepiece (unigram subwords trained on the training split, --vocab-size pieces per side; the model is saved in the run directory)")->capture_default_str()->check(CLI::IsMember({"word", "char", "sentencepiece"}));
  c->add_option("--vocab-size", b.vocab_size, "Corpora: vocabulary limit per side (the most frequent tokens, or the sentencepiece pieces)")->capture_default_str()->check(CLI::Range(int64_t(5), int64_t(1000000)));
}
// CLI::ValidationError unless --batch (and --max-tokens, when set) divide by --grad-accumulation.
inline void check_batch_flags(const SeqBatchFlags& b, const TrainFlags& f) {
  require_divisible(b.batch, "--batch", f);
  if (b.max_tokens > 0) require_divisible(b.max_tokens, "--max-tokens", f);
}

// The pairs of a corpus task (bible: the prepared train/dev/test files; tsv: --tsv-train,
// --tsv-valid, --tsv-test), at most --train-size / --valid-size / --test-size of each. Without
// --tsv-valid the validation pairs are the last --valid-size of the first --train-size +
// --valid-size training pairs, and they are held out of training (the log says so): --target
// and the evaluations measure pairs the model never trained on.
struct CorpusSplit {
  std::vector<data::Example> train, valid, test;
};
inline CorpusSplit load_corpus_split(const SeqTaskFlags& t, const char* command) {
  CorpusSplit c;
  const std::string dir = t.data_dir + "/bible-en-es";
  if (t.task == "bible") {
    c.train = data::read_parallel_tsv(dir + "/train.tsv", t.train_size);
    c.valid = data::read_parallel_tsv(dir + "/dev.tsv", t.valid_size);
    c.test = data::read_parallel_tsv(dir + "/test.tsv", t.test_size);
    return c;
  }
  GRAFT_CHECK(!t.tsv_train.empty() && !t.tsv_test.empty(), "{}: --task tsv needs --tsv-train and --tsv-test",
              command);
  if (!t.tsv_valid.empty()) {
    c.train = data::read_parallel_tsv(t.tsv_train, t.train_size);
    c.valid = data::read_parallel_tsv(t.tsv_valid, t.valid_size);
  } else {
    c.train = data::read_parallel_tsv(t.tsv_train, t.train_size + t.valid_size);
    GRAFT_CHECK(int64_t(c.train.size()) > t.valid_size,
                "{}: {} has {} pairs, too few to hold out --valid-size {} for validation and train on "
                "the rest; give --tsv-valid FILE or a smaller --valid-size",
                command, t.tsv_train, c.train.size(), t.valid_size);
    c.valid.assign(c.train.end() - long(t.valid_size), c.train.end());
    c.train.resize(c.train.size() - size_t(t.valid_size));
    fmt::print("validation: the last {} pairs of {}, held out of training (--tsv-valid FILE to give "
               "them)\n", c.valid.size(), t.tsv_train);
  }
  c.test = data::read_parallel_tsv(t.tsv_test, t.test_size);
  return c;
}

// A "word" (lowercased, punctuation split), "char" or "sentencepiece" (unigram subwords)
// tokenizer fitted on `texts`, keeping the most frequent tokens up to `max_size` in all, the four
// specials included (0: no limit; 8000 pieces for sentencepiece).
inline std::unique_ptr<data::Tokenizer> fit_tokenizer(const std::string& kind,
                                                      const std::vector<std::string>& texts,
                                                      int64_t max_size) {
  if (kind == "word")
    return std::make_unique<data::WordTokenizer>(data::WordTokenizer::fit(texts, true, true, 1, max_size));
  if (kind == "sentencepiece") return data::SentencePieceTokenizer::fit(texts, max_size > 0 ? max_size : 8000);
  return std::make_unique<data::CharTokenizer>(data::CharTokenizer::fit(texts, 1, max_size));
}

// A sentencepiece tokenizer's model file sits beside its vocabulary: src_vocab.txt -> src_spm.model.
inline std::string spm_model_path(const std::string& vocab_path) {
  const std::string suffix = "_vocab.txt";
  if (vocab_path.size() > suffix.size() && vocab_path.ends_with(suffix))
    return vocab_path.substr(0, vocab_path.size() - suffix.size()) + "_spm.model";
  return vocab_path + ".spm.model";
}

// Writes the vocabulary to `path` (and a sentencepiece model beside it).
inline void save_tokenizer(const data::Tokenizer& tok, const std::string& path) {
  if (auto* sp = dynamic_cast<const data::SentencePieceTokenizer*>(&tok)) sp->save_model(spm_model_path(path));
  tok.vocab().save(path);
}

// The tokenizer of kind `kind` over the vocabulary file `path` (as save_tokenizer wrote it).
inline std::unique_ptr<data::Tokenizer> load_tokenizer(const std::string& kind, const std::string& path) {
  data::Vocab v = data::Vocab::load(path);
  if (kind == "word") return std::make_unique<data::WordTokenizer>(std::move(v), true, true);
  if (kind == "sentencepiece") return data::SentencePieceTokenizer::load(spm_model_path(path), std::move(v));
  return data::make_tokenizer(kind, std::move(v));
}

// One sentence as ids; a sentence of only spaces becomes one <unk>, so no sequence is empty.
inline std::vector<int64_t> encode_line(const data::Tokenizer& tok, const std::string& text) {
  std::vector<int64_t> ids = tok.encode(text);
  if (ids.empty()) ids.push_back(data::kUnk);
  return ids;
}

// The source (or, with `target`, the target) side of every example.
inline Ids encode_side(const data::Tokenizer& tok, const std::vector<data::Example>& ex, bool target) {
  Ids out;
  out.reserve(ex.size());
  for (const auto& e : ex) out.push_back(encode_line(tok, target ? e.target : e.source));
  return out;
}

// This rank's share (dist::split, under mpirun) of the training batch whose example indices are
// `idx`, as a batch on `dev`, and how many examples it holds. A rank whose share is empty gets
// the batch's first example, so that every rank runs the step; its loss then counts 0 tokens.
struct RankBatch {
  data::Seq2SeqBatch batch;
  int64_t count = 0;
};
inline RankBatch rank_batch(const std::vector<int64_t>& idx, const Ids& xs, const Ids& ys, Device dev) {
  const dist::Range mine = dist::split(int64_t(idx.size()));
  Ids bx, by;
  for (int64_t j = 0; j < std::max<int64_t>(mine.count, 1); ++j) {
    const int64_t i = idx[size_t(mine.count > 0 ? mine.begin + j : 0)];
    bx.push_back(xs[size_t(i)]), by.push_back(ys[size_t(i)]);
  }
  return {batch_on(data::make_seq2seq_batch(bx, by), dev), mine.count};
}

// How big a step's batch is, for the log: "64" sentences or "<= 4096 tokens", and with K > 1
// micro-batches "64 (2 x 32)".
inline std::string batch_size_text(int64_t batch, int64_t max_tokens, int64_t K) {
  auto one = [&](int64_t n) { return max_tokens > 0 ? fmt::format("<= {} tokens", n) : std::to_string(n); };
  const int64_t n = max_tokens > 0 ? max_tokens : batch;
  return K > 1 ? fmt::format("{} ({} x {})", one(n), K, one(n / K)) : one(n);
}

// The training batches as a pure function of the micro-batch index: epoch e is bucketed with its
// own seed (seed * seed_mul + e), so a resumed run sees the batches an uninterrupted one would.
// Batches of `sentences` examples bucketed by source length, or, with max_tokens > 0, of at most
// max_tokens padded tokens each (data::token_batches on max(source, target + 1) lengths).
class EpochBatches {
 public:
  EpochBatches(const Ids& xs, const Ids& ys, int64_t sentences, int64_t max_tokens, uint64_t seed,
               uint64_t seed_mul)
      : sentences_(sentences), max_tokens_(max_tokens), seed_(seed), seed_mul_(seed_mul) {
    for (size_t i = 0; i < xs.size(); ++i) {
      lengths_.push_back(int64_t(xs[i].size()));
      cost_.push_back(std::max(int64_t(xs[i].size()), int64_t(ys[i].size()) + 1));
    }
  }
  const std::vector<int64_t>& at(int64_t index) {
    if (epoch_ < 0 || index < first_) make(0, 0);
    while (index >= first_ + int64_t(batches_.size())) make(epoch_ + 1, first_ + int64_t(batches_.size()));
    return batches_[size_t(index - first_)];
  }

 private:
  void make(int64_t e, int64_t first) {
    Generator g(seed_ * seed_mul_ + uint64_t(e));
    batches_ = max_tokens_ > 0 ? data::token_batches(cost_, max_tokens_, g)
                               : data::bucket_batches(lengths_, sentences_, g);
    GRAFT_CHECK(!batches_.empty(), "no training examples to batch");
    epoch_ = e, first_ = first;
  }
  std::vector<int64_t> lengths_, cost_;
  int64_t sentences_, max_tokens_;
  uint64_t seed_, seed_mul_;
  int64_t epoch_ = -1, first_ = 0;  // batches_ are micro-batches first_ .. of epoch epoch_
  std::vector<std::vector<int64_t>> batches_;
};

// --target: the first evaluation whose validation exact match reaches `target` (when > 0)
// records its step and the seconds since `start`, says so on stderr and stops the training.
struct TargetWatch {
  double target = 0;
  std::chrono::steady_clock::time_point start;
  int64_t step = -1;  // -1: not reached
  double wall_s = 0;
  void check(nn::Trainer& trainer, double exact) {
    if (target <= 0 || exact < target || step >= 0) return;
    step = trainer.step();
    wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "valid exact match {:.4f} >= {} at step {} ({:.1f} s): stopping\n", exact,
               target, step, wall_s);
    trainer.request_stop(nn::StopReason::target);
  }
};

// The head of results.json: the task, the command's `extra` entries, then how the training went.
inline nlohmann::ordered_json results_head(const std::string& task, const nlohmann::ordered_json& extra,
                                           const nn::TrainResult& tr, double train_s,
                                           const TargetWatch& target) {
  nlohmann::ordered_json res;
  res["task"] = task;
  for (const auto& [k, v] : extra.items()) res[k] = v;
  res["steps"] = tr.step;
  res["stop_reason"] = nn::stop_reason_name(tr.reason);
  res["train_wall_s"] = train_s;
  res["reached_target_step"] = target.step;
  res["reached_target_wall_s"] = target.wall_s;
  return res;
}

// The decoding options of `graft translate`: max_len 0 stands for 2 x the longest input + 10.
inline models::DecodeOptions translate_options(const Ids& src, int64_t beam, int64_t max_len,
                                               double length_penalty) {
  int64_t longest = 0;
  for (const auto& s : src) longest = std::max<int64_t>(longest, int64_t(s.size()));
  return {.beam = beam, .max_len = max_len ? max_len : 2 * longest + 10, .length_penalty = length_penalty};
}

// model.translate over src in batches of `batch` sentences; a Ctrl-C stops between batches.
template <class Model>
std::vector<models::Hypothesis> translate_all(Model& model, const Ids& src,
                                              const models::DecodeOptions& dopt, size_t batch) {
  std::vector<models::Hypothesis> hyps;
  for_each_chunk(src.size(), batch, [&](size_t first, size_t last) {
    const Ids part(src.begin() + long(first), src.begin() + long(last));
    for (auto& h : model.translate(part, dopt, int64_t(batch))) hyps.push_back(std::move(h));
  });
  return hyps;
}

// Writes the attention weights w [T, S] of one translation as a PNG heatmap: rows the output
// tokens and <eos>, columns the source tokens (a space shown as U+2423); says so on stderr.
inline void write_attention_png(const std::string& path, const Tensor& w, std::vector<std::string> rows,
                                std::vector<std::string> cols, const std::string& title) {
  rows.push_back("<eos>");
  for (auto* v : {&rows, &cols})
    for (auto& s : *v)
      if (s == " ") s = "\u2423";  // a visible space
  const Tensor wf = w.to(DType::f32).contiguous();
  try {
    write_heatmap_png(path, wf.to_vector<float>(), w.size(0), w.size(1), rows, cols, title);
  } catch (...) {
    release_plot_caches();
    throw;
  }
  release_plot_caches();
  fmt::print(stderr, "wrote {} ({} output x {} source tokens)\n", path, w.size(0), w.size(1));
}

}  // namespace graft::tools
