// The wordnet-lexname task (data/wordnet_lexnames.h): WordNet glosses labelled with their
// lexicographer file, split by a hash of the synset key.
#include "data/wordnet_lexnames.h"

#include <fmt/format.h>

#include "data/pairs.h"
#include "ops/error.h"

namespace graft::data {

const std::string& lexname(int64_t i) {
  // WordNet 3.0's lexicographer files, by number (lexnames(5WN)).
  static const std::vector<std::string> names = {
      "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
      "noun.artifact", "noun.attribute", "noun.body", "noun.cognition", "noun.communication",
      "noun.event", "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive",
      "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
      "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
      "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition",
      "verb.communication", "verb.competition", "verb.consumption", "verb.contact",
      "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession",
      "verb.social", "verb.stative", "verb.weather", "adj.ppl"};
  GRAFT_CHECK(i >= 0 && i < kNumLexnames, "lexname: number {} outside [0, {})", i, kNumLexnames);
  return names[size_t(i)];
}

int wordnet_split_of(const std::string& key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bit
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  const uint64_t bucket = h % 10;
  return bucket == 0 ? 0 : bucket == 1 ? 1 : 2;
}

LexnameSplits wordnet_lexname_task(const std::string& wordnet_dir) {
  LexnameSplits s;
  for (const WordNetSynset& syn : read_wordnet_synsets(wordnet_dir)) {
    GRAFT_CHECK(syn.lexfile >= 0 && syn.lexfile < kNumLexnames, "wordnet lexnames: synset {} has "
                "lexicographer file {} outside [0, {})", syn.key, syn.lexfile, kNumLexnames);
    if (syn.gloss.empty()) continue;
    const int split = wordnet_split_of(syn.key);
    (split == 0 ? s.test : split == 1 ? s.dev : s.train).push_back({syn.gloss, syn.lexfile});
  }
  GRAFT_CHECK(!s.train.empty() && !s.dev.empty() && !s.test.empty(),
              "wordnet lexnames: {} gave an empty split (train {}, dev {}, test {})", wordnet_dir,
              s.train.size(), s.dev.size(), s.test.size());
  return s;
}

}  // namespace graft::data
