// The wordnet-lexname classification task: a WordNet gloss -> its synset's lexicographer file
// (45 classes: adj.all, adj.pert, adv.all, noun.Tops, noun.act, ..., verb.weather, adj.ppl).
// The split is fixed, by synset: a 64-bit FNV-1a hash of the synset key ("n:00001740") modulo
// 10 gives 0 -> test, 1 -> dev, else train (as data/pairs.h's gloss-matching task).
//
//   data::LexnameSplits s = data::wordnet_lexname_task("/usr/share/wordnet");
//   // s.train[i].text = "a domesticated carnivorous mammal ...", s.train[i].label = 5 (noun.animal)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace graft::data {

inline constexpr int64_t kNumLexnames = 45;
// The lexicographer file name of number i (0..44); graft::Error outside that range.
const std::string& lexname(int64_t i);

// 0 = test, 1 = dev, 2 = train: the split of a synset key.
int wordnet_split_of(const std::string& synset_key);

struct LabeledText {
  std::string text;
  int64_t label = 0;
};

struct LexnameSplits {
  std::vector<LabeledText> train, dev, test;
};

// Every synset with a non-empty gloss, in file order (noun, verb, adj, adv). graft::Error as
// read_wordnet_synsets, or for a lexicographer file number outside 0..44.
LexnameSplits wordnet_lexname_task(const std::string& wordnet_dir);

}  // namespace graft::data
