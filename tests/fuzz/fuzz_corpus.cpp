// libFuzzer target for the corpus readers a user points graft at: the parallel TSV of `train
// seq2seq --data` (read_parallel_tsv), the sentence-pair TSV of `train abcnn`
// (read_pairs_tsv, PairVocab, make_pair_batch), diatheke's Bible text (parse_diatheke,
// bible_chapters, write_documents), WordNet's data.* files (read_wordnet_synsets,
// wordnet_gloss_pairs, wordnet_lexname_task) and the plain-text corpus of `train
// bert-pretrain` (split_documents, tokenize_documents, create_pretraining_examples). Any
// input must either be read or raise graft::Error; a crash, a sanitizer report, a hang, any
// other exception or a broken property below is a bug.
//
// Input layout: byte 0 picks the reader (value % 5) and its small parameters (the other bits),
// the rest is the file's content (written to a scratch file for the readers that take a path).
//
//   build/tests/fuzz/fuzz_corpus -dict=tests/fuzz/corpus.dict -max_total_time=60 \
//       /tmp/corpus tests/fuzz/corpus/corpus
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/bert_pretraining.h"
#include "data/english_text.h"
#include "data/pairs.h"
#include "data/parallel_corpus.h"
#include "data/wordnet_lexnames.h"
#include "data/wordpiece.h"
#include "ops/error.h"
#include "tests/fuzz/fuzz_util.h"

using namespace graft;

namespace {

void parallel_tsv(const std::string& content, uint8_t param) {
  const std::string path = fuzz::write_scratch("corpus.tsv", content);
  const int64_t limit = param % 4;  // 0: no limit
  const std::vector<data::Example> ex = data::read_parallel_tsv(path, limit);
  if (limit > 0) GRAFT_FUZZ_EXPECT(int64_t(ex.size()) <= limit);
  for (const auto& e : ex) GRAFT_FUZZ_EXPECT(!e.source.empty() && !e.target.empty());
}

void pairs_tsv(const std::string& content, uint8_t param) {
  const std::string path = fuzz::write_scratch("pairs.tsv", content);
  const std::vector<data::SentencePair> pairs = data::read_pairs_tsv(path);
  for (const auto& p : pairs) {
    GRAFT_FUZZ_EXPECT(!p.a.empty() && !p.b.empty());
    GRAFT_FUZZ_EXPECT(p.label == 0 || p.label == 1);
  }
  if (pairs.empty()) return;
  const data::PairVocab vocab = data::PairVocab::build(pairs, 1 + param % 2);
  std::vector<int64_t> idx;
  for (size_t i = 0; i < pairs.size() && i < 8; ++i) idx.push_back(int64_t(i));
  const int64_t max_len = 1 + param % 16;
  const data::PairBatch b = data::make_pair_batch(pairs, idx, vocab, max_len);
  GRAFT_FUZZ_EXPECT(b.len_a.size() == idx.size() && b.len_b.size() == idx.size());
  for (size_t i = 0; i < idx.size(); ++i)
    GRAFT_FUZZ_EXPECT(b.len_a[i] >= 1 && b.len_a[i] <= max_len && b.len_b[i] >= 1 && b.len_b[i] <= max_len);
}

void diatheke(const std::string& content) {
  const auto verses = data::parse_diatheke(content);
  for (const auto& [key, text] : verses) GRAFT_FUZZ_EXPECT(!key.empty());
  const std::vector<std::string> chapters = data::bible_chapters(verses);
  std::string out;
  const auto [docs, sentences] = data::write_documents(out, chapters);
  GRAFT_FUZZ_EXPECT(docs >= 0 && docs <= int64_t(chapters.size()) && sentences >= docs);
}

void wordnet(const std::string& content, uint8_t param) {
  // The reader looks for dir/data.{noun,verb,adj,adv}; the input is one of them.
  static const char* const parts[] = {"noun", "verb", "adj", "adv"};
  const std::string dir = fuzz::scratch_dir() + "/wordnet";
  std::filesystem::create_directories(dir);
  for (const char* p : parts) std::filesystem::remove(dir + "/data." + p);
  fuzz::write_scratch(std::string("wordnet/data.") + parts[param % 4], content);
  const auto synsets = data::read_wordnet_synsets(dir);
  for (const auto& s : synsets) GRAFT_FUZZ_EXPECT(s.lexfile >= 0);
  const data::PairSplits splits = data::wordnet_gloss_pairs(dir, param);
  for (const auto* v : {&splits.train, &splits.dev, &splits.test})
    for (const auto& p : *v) GRAFT_FUZZ_EXPECT(p.label == 0 || p.label == 1);
  const data::LexnameSplits lex = data::wordnet_lexname_task(dir);
  for (const auto* v : {&lex.train, &lex.dev, &lex.test})
    for (const auto& t : *v) GRAFT_FUZZ_EXPECT(t.label >= 0 && t.label < data::kNumLexnames);
}

const data::WordPieceTokenizer& bert_tokenizer() {
  static const data::WordPieceTokenizer tok(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", "the", "##s",
       "##a", "##b", ".", "!", "?", ",", "in", "##ing", "x", "##x"});
  return tok;
}

void bert_corpus(const std::string& content, uint8_t param) {
  const std::vector<std::string> docs = data::split_documents(content);
  for (const auto& d : docs) (void)data::split_sentences(d);
  const auto tdocs = data::tokenize_documents(docs, bert_tokenizer());
  data::BertPretrainingOptions o;
  o.max_seq_len = 4 + param % 64;
  o.seed = param;
  o.max_predictions = param % 3;
  const auto ex = data::create_pretraining_examples(tdocs, bert_tokenizer(), o);
  const int64_t V = bert_tokenizer().size();
  for (const auto& e : ex) {
    GRAFT_FUZZ_EXPECT(int64_t(e.input_ids.size()) <= o.max_seq_len);
    GRAFT_FUZZ_EXPECT(e.input_ids.size() == e.token_type_ids.size() && e.input_ids.size() == e.labels.size());
    GRAFT_FUZZ_EXPECT(e.next_sentence_label == 0 || e.next_sentence_label == 1);
    for (size_t i = 0; i < e.input_ids.size(); ++i) {
      GRAFT_FUZZ_EXPECT(e.input_ids[i] >= 0 && e.input_ids[i] < V);
      GRAFT_FUZZ_EXPECT(e.labels[i] == data::kIgnoreIndex || (e.labels[i] >= 0 && e.labels[i] < V));
    }
  }
  (void)data::tokenize_words(content);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t which = data[0] % 5, param = data[0] / 5;
  const std::string content(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (which) {
      case 0: parallel_tsv(content, param); break;
      case 1: pairs_tsv(content, param); break;
      case 2: diatheke(content); break;
      case 3: wordnet(content, param); break;
      default: bert_corpus(content, param); break;
    }
  } catch (const Error&) {
  }
  return 0;
}
