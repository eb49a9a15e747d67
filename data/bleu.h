// Corpus BLEU-4 (Papineni et al. 2002) as sacreBLEU computes it by default: the "13a"
// tokenisation (mteval-v13a), n-gram precisions clipped by the references' counts and summed
// over the corpus, the "exp" smoothing for an n-gram order with no match, and the brevity
// penalty exp(1 - r/c) when the hypotheses are shorter than the closest reference lengths.
//
//   data::BleuScore s = data::corpus_bleu({"the cat sat"}, {{"the cat sat down"}});
//   s.score   // in [0, 100]
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace graft::data {

// sacreBLEU's tokenizer_13a: separates punctuation and symbols (not '.' or ',' between digits,
// not '-' not after a digit... exactly as the mteval-v13a regexps), unescapes &quot; &amp;
// &lt; &gt;, joins the tokens with single spaces.
std::string tokenize_13a(const std::string& line);

struct BleuScore {
  double score = 0;                   // 0..100
  std::array<double, 4> precisions{}; // p_n in percent (after smoothing)
  std::array<int64_t, 4> matches{}, totals{};
  double brevity_penalty = 0;
  int64_t sys_len = 0, ref_len = 0;
};

// hypotheses[i] is scored against references[i] (one or more each). tokenize: apply 13a
// first (sacreBLEU's default); otherwise tokens are split on spaces as given.
// graft::Error when the counts differ or a hypothesis has no reference.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references,
                      bool tokenize = true);
// The same from pre-split tokens (one reference per hypothesis).
BleuScore corpus_bleu_tokens(const std::vector<std::vector<std::string>>& hypotheses,
                             const std::vector<std::vector<std::string>>& references);

// Lowercases UTF-8 text as Python's str.lower() does (what sacreBLEU's --lowercase applies) for
// the letters of ASCII, Latin-1 (À-Þ), Latin Extended-A (Ā-ž: the European Latin alphabets) and
// Cyrillic (U+0400-U+052F); every other byte is kept, so valid UTF-8 stays valid ("Y ACONTECIÓ"
// -> "y aconteció"). Not lowered: Greek (its final sigma depends on context), and the rest.
std::string lowercase(std::string_view s);
// Case-insensitive corpus BLEU (sacreBLEU --lowercase): hypotheses and references lowercased.
BleuScore corpus_bleu_lowercase(const std::vector<std::string>& hypotheses,
                                const std::vector<std::vector<std::string>>& references);


}  // namespace graft::data
