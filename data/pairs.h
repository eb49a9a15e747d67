// Sentence-pair data for pair classifiers (ABCNN): a real task built from WordNet, a tiny
// synthetic task for tests, a word vocabulary trained from scratch, and padded batches.
//
// The WordNet task ("gloss matching"): for every synset with example sentences (Debian package
// wordnet-base, text files /usr/share/wordnet/data.{noun,verb,adj,adv}), each example sentence
// is paired with
//   * its own synset's gloss (label 1),
//   * one other gloss (label 0): with probability 1/2, and whenever the example's lemma has
//     other senses, a *hard* negative, the gloss of another sense of the same word; otherwise
//     a random synset's gloss of the same part of speech.
// So the classes are balanced and a hard negative shares the word being illustrated. The split
// is by synset (a hash of "pos:offset": 80% train, 10% dev, 10% test), so test sentences and
// their glosses come from synsets never seen in training; negatives are drawn with a fixed
// seed. prepare_wordnet_pairs writes the three splits once as TSV files (label \t sentence \t
// gloss) and reads them back on later runs.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/tensor.h"

namespace graft::data {

struct SentencePair {
  std::vector<std::string> a, b;  // tokens of the two sentences
  int64_t label = 0;              // 1: a match (paraphrase, gloss of the example), 0: not
};

struct PairSplits {
  std::vector<SentencePair> train, dev, test;
};

// One WordNet synset as read from a data.* file (also used by data/wordnet_lexnames.h).
struct WordNetSynset {
  std::string key;                 // "n:00001740" (satellite adjectives "s" -> "a")
  int64_t lexfile = 0;             // lexicographer file number (0..44, e.g. 3 = noun.Tops)
  std::vector<std::string> words;  // lemmas, lower case, '_' kept
  std::string gloss;               // the definition (before the examples)
  std::vector<std::string> examples;
};
// Every synset of dir/data.{noun,verb,adj,adv} in file order (those present; graft::Error when
// none is readable or a line is malformed, naming the file and line).
std::vector<WordNetSynset> read_wordnet_synsets(const std::string& wordnet_dir);

// Lower-cased words: runs of letters, digits and apostrophes inside words ("don't").
std::vector<std::string> tokenize_words(const std::string& text);

// Builds the gloss-matching task from a WordNet dict directory (data.noun, data.verb, ...).
// graft::Error when no data.* file is readable (hint: apt-get install wordnet-base) or a file
// is malformed (the message names the file and line).
PairSplits wordnet_gloss_pairs(const std::string& wordnet_dir, uint64_t seed = 1);

// Reads out_dir/{train,dev,test}.tsv if all three exist; otherwise builds them from
// wordnet_dir (wordnet_gloss_pairs) and writes them (atomically) first.
PairSplits prepare_wordnet_pairs(const std::string& wordnet_dir, const std::string& out_dir,
                                 uint64_t seed = 1);

// TSV: one pair per line, "label<TAB>sentence a<TAB>sentence b" (tokens joined by spaces).
void write_pairs_tsv(const std::string& path, const std::vector<SentencePair>& pairs);
// graft::Error for a missing file or a bad line (file:line in the message).
std::vector<SentencePair> read_pairs_tsv(const std::string& path);

// A tiny synthetic task (for tests and smoke runs): sentence a is 4-7 random words from a
// vocabulary of `vocab` words; a positive b holds the same words (shuffled, one of them
// replaced), a negative b is fresh random words. Balanced labels.
std::vector<SentencePair> synthetic_pairs(int64_t n, uint64_t seed, int64_t vocab = 30);

// Word ids: 0 = padding, 1 = unknown, then words by descending count (ties alphabetical).
class PairVocab {
 public:
  static constexpr int64_t kPad = 0, kUnk = 1;
  PairVocab() = default;
  // Words seen at least min_count times in either sentence of `pairs`.
  static PairVocab build(const std::vector<SentencePair>& pairs, int64_t min_count = 1);
  // The vocabulary whose id i is words[i] (as word(i) lists a built one back): words[0] and
  // words[1] must be <pad> and <unk>; graft::Error for an empty or repeated word.
  static PairVocab from_words(std::vector<std::string> words);
  int64_t size() const { return int64_t(words_.size()); }
  int64_t id(const std::string& word) const;  // kUnk when absent
  const std::string& word(int64_t id) const;  // graft::Error when out of range

 private:
  std::vector<std::string> words_ = {"<pad>", "<unk>"};
  std::unordered_map<std::string, int64_t> index_;
};

// A batch: a, b int64 [B, S] (ids, right-padded with kPad, cut to S = max_len tokens),
// label int64 [B], and each sentence's length before padding (at most max_len).
struct PairBatch {
  Tensor a, b, label;
  std::vector<int64_t> len_a, len_b;
};
PairBatch make_pair_batch(const std::vector<SentencePair>& pairs,
                          const std::vector<int64_t>& indices, const PairVocab& vocab,
                          int64_t max_len);

}  // namespace graft::data
