// BERT WordPiece tokenizer: BasicTokenizer, greedy WordPiece, vocab.txt I/O, pair encoding and
// vocabulary training. The Unicode functions (on utf8proc) are in wordpiece_unicode.cpp.
#include "data/wordpiece.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "data/text_io.h"
#include "data/token_lookup.h"
#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::data {

// --------------------------------------------------------------------------- BasicTokenizer

BasicTokenizer::BasicTokenizer(BasicTokenizerOptions options, std::vector<std::string> never_split)
    : options_(options), never_split_(std::move(never_split)) {}

std::vector<std::string> BasicTokenizer::tokenize(std::string_view text) const {
  using namespace unicode;
  std::u32string in = decode_utf8(text), clean;
  clean.reserve(in.size());
  for (char32_t c : in) {  // clean-up and CJK spacing
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      clean.push_back(' ');
    } else if (options_.split_cjk && is_cjk(c)) {
      clean.push_back(' ');
      clean.push_back(c);
      clean.push_back(' ');
    } else {
      clean.push_back(c);
    }
  }
  if (options_.nfc) clean = nfc(clean);
  bool strip = options_.strip_accents.value_or(options_.lower_case);
  std::vector<std::string> out;
  size_t i = 0;
  while (i < clean.size()) {
    while (i < clean.size() && clean[i] == ' ') ++i;
    size_t j = i;
    while (j < clean.size() && clean[j] != ' ') ++j;
    if (j == i) break;
    std::u32string word = clean.substr(i, j - i);
    i = j;
    std::string word8 = encode_utf8(word);
    if (std::find(never_split_.begin(), never_split_.end(), word8) != never_split_.end()) {
      out.push_back(std::move(word8));
      continue;
    }
    if (strip) {  // accents first, then case, as Hugging Face's Rust BertNormalizer
      std::u32string d = nfd(word);
      word.clear();
      for (char32_t c : d)
        if (!is_mark_nonspacing(c)) word.push_back(c);
    }
    if (options_.lower_case) word = lower(word);
    std::u32string piece;  // split off every punctuation character
    for (char32_t c : word) {
      if (is_punctuation(c)) {
        if (!piece.empty()) out.push_back(encode_utf8(piece));
        piece.clear();
        out.push_back(encode_utf8(std::u32string(1, c)));
      } else {
        piece.push_back(c);
      }
    }
    if (!piece.empty()) out.push_back(encode_utf8(piece));
  }
  return out;
}

// ----------------------------------------------------------------------- WordPieceTokenizer

const std::vector<std::string>& WordPieceTokenizer::special_tokens() {
  static const std::vector<std::string> s = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  return s;
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> tokens, BasicTokenizerOptions options)
    : tokens_(std::move(tokens)), basic_(options, special_tokens()) {
  // As BertTokenizer's load_vocab: a repeated token maps to its last line.
  for (size_t i = 0; i < tokens_.size(); ++i) index_[tokens_[i]] = int64_t(i);
  int64_t* ids[] = {&pad_, &unk_, &cls_, &sep_, &mask_};
  for (size_t k = 0; k < 5; ++k) {
    auto it = index_.find(special_tokens()[k]);
    GRAFT_CHECK(it != index_.end(), "WordPieceTokenizer: the vocabulary ({} tokens) has no {}; "
                "hint: a BERT vocab.txt lists [PAD] [UNK] [CLS] [SEP] [MASK]",
                tokens_.size(), special_tokens()[k]);
    *ids[k] = it->second;
  }
}

WordPieceTokenizer WordPieceTokenizer::load(const std::string& vocab_path,
                                            BasicTokenizerOptions options) {
  std::string all = read_file(vocab_path, "WordPieceTokenizer.load",
                              "pass the path of a BERT vocab.txt (one token per line)");
  strip_bom(all);
  // Python's text mode: \r\n and a lone \r end a line as well as \n.
  std::vector<std::string> tokens;
  std::string cur;
  for (size_t i = 0; i < all.size(); ++i) {
    char c = all[i];
    if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < all.size() && all[i + 1] == '\n') ++i;
      tokens.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) tokens.push_back(std::move(cur));
  return WordPieceTokenizer(std::move(tokens), options);
}

void WordPieceTokenizer::save(const std::string& vocab_path) const {
  for (const std::string& t : tokens_)
    GRAFT_CHECK(t.find_first_of("\r\n") == std::string::npos,
                "WordPieceTokenizer.save: a token contains a line break; hint: vocab.txt holds "
                "one token per line");
  std::ofstream f(vocab_path, std::ios::binary);
  GRAFT_CHECK(f.good(), "WordPieceTokenizer.save: cannot write '{}'", vocab_path);
  for (const std::string& t : tokens_) f << t << '\n';
  GRAFT_CHECK(f.good(), "WordPieceTokenizer.save: write to '{}' failed", vocab_path);
}

int64_t WordPieceTokenizer::token_to_id(const std::string& token) const {
  return find_token_id(index_, token, unk_);
}

const std::string& WordPieceTokenizer::id_to_token(int64_t id) const {
  return token_of_id(tokens_, id, "WordPieceTokenizer.id_to_token",
                     "ids come from this tokenizer's encode()");
}

bool WordPieceTokenizer::is_special(int64_t id) const {
  return id == pad_ || id == unk_ || id == cls_ || id == sep_ || id == mask_;
}

std::vector<std::string> WordPieceTokenizer::wordpiece(std::string_view word) const {
  std::u32string chars = unicode::decode_utf8(word);
  if (int64_t(chars.size()) > kMaxInputCharsPerWord) return {tokens_[size_t(unk_)]};
  // Byte offset of every code point, so substrings are taken from the UTF-8 text directly.
  std::vector<size_t> off(chars.size() + 1, 0);
  for (size_t k = 0; k < chars.size(); ++k)
    off[k + 1] = off[k] + (chars[k] < 0x80 ? 1 : chars[k] < 0x800 ? 2 : chars[k] < 0x10000 ? 3 : 4);
  std::string w = unicode::encode_utf8(chars);
  std::vector<std::string> pieces;
  std::string cand;
  size_t start = 0;
  while (start < chars.size()) {
    size_t end = chars.size();
    bool found = false;
    while (start < end) {  // longest match first
      cand.assign(start > 0 ? "##" : "");
      cand.append(w, off[start], off[end] - off[start]);
      if (index_.count(cand)) { found = true; break; }
      --end;
    }
    if (!found) return {tokens_[size_t(unk_)]};
    pieces.push_back(cand);
    start = end;
  }
  return pieces;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  // Special tokens written in the text ("[MASK]") are split out first, as Hugging Face does.
  std::vector<std::string> out;
  size_t pos = 0;
  auto flush = [&](std::string_view chunk) {
    for (const std::string& w : basic_.tokenize(chunk))
      for (std::string& p : wordpiece(w)) out.push_back(std::move(p));
  };
  // next[k]: the first occurrence of special k at or after pos (npos: none left). It is looked
  // up again only once pos has passed it, so each special scans the text once: O(n) in all
  // (finding every special from pos at every match would be quadratic in the matches).
  const std::vector<std::string>& specials = special_tokens();
  std::vector<size_t> next(specials.size());
  for (size_t k = 0; k < specials.size(); ++k) next[k] = text.find(specials[k]);
  while (pos < text.size()) {
    size_t best = std::string_view::npos, len = 0;
    for (size_t k = 0; k < specials.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < pos) next[k] = text.find(specials[k], pos);
      const size_t at = next[k];
      if (at < best || (at == best && specials[k].size() > len)) { best = at; len = specials[k].size(); }
    }
    if (best == std::string_view::npos) break;
    flush(text.substr(pos, best - pos));
    out.push_back(std::string(text.substr(best, len)));
    pos = best + len;
  }
  flush(text.substr(std::min(pos, text.size())));
  return out;
}

std::vector<int64_t> WordPieceTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int64_t> ids;
  if (add_special_tokens) ids.push_back(cls_);
  for (const std::string& t : tokenize(text)) ids.push_back(token_to_id(t));
  if (add_special_tokens) ids.push_back(sep_);
  return ids;
}

PairEncoding WordPieceTokenizer::encode_pair(std::string_view a, std::string_view b,
                                             int64_t max_len) const {
  GRAFT_CHECK(max_len >= 3, "WordPieceTokenizer.encode_pair: max_len {} leaves no room for "
              "[CLS] A [SEP] B [SEP]; hint: pass max_len >= 3", max_len);
  std::vector<int64_t> ia = encode(a), ib = encode(b);
  // Longest first, as Hugging Face's (Rust) LongestFirst: the shorter side is kept whole when
  // it fits in half the budget, else it gets floor(budget / 2) and the longer (B on ties) the rest.
  size_t budget = size_t(max_len - 3);
  if (ia.size() + ib.size() > budget) {
    bool a_longer = ia.size() > ib.size();
    size_t s = std::min(ia.size(), ib.size()), keep_s = s, keep_l = std::max(s, budget - std::min(s, budget));
    if (keep_s + keep_l > budget) { keep_s = budget / 2; keep_l = budget - keep_s; }
    ia.resize(std::min(ia.size(), a_longer ? keep_l : keep_s));
    ib.resize(std::min(ib.size(), a_longer ? keep_s : keep_l));
  }
  PairEncoding e;
  e.input_ids.push_back(cls_);
  e.input_ids.insert(e.input_ids.end(), ia.begin(), ia.end());
  e.input_ids.push_back(sep_);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  e.input_ids.insert(e.input_ids.end(), ib.begin(), ib.end());
  e.input_ids.push_back(sep_);
  e.token_type_ids.resize(e.input_ids.size(), 1);
  return e;
}

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string out;
  for (int64_t id : ids) {
    const std::string& t = id_to_token(id);
    if (skip_special && is_special(id)) continue;
    if (t.rfind("##", 0) == 0 && !out.empty()) {
      out.append(t, 2);
    } else {
      if (!out.empty()) out.push_back(' ');
      out.append(t);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------- training

WordPieceTokenizer WordPieceTokenizer::train(const std::vector<std::string>& corpus,
                                             int64_t vocab_size, BasicTokenizerOptions options,
                                             int64_t min_frequency) {
  GRAFT_CHECK(vocab_size > int64_t(special_tokens().size()), "WordPieceTokenizer.train: "
              "vocab_size {} must exceed the {} special tokens", vocab_size,
              special_tokens().size());
  GRAFT_CHECK(min_frequency >= 1, "WordPieceTokenizer.train: min_frequency {} must be >= 1",
              min_frequency);
  BasicTokenizer basic(options);
  std::map<std::string, int64_t> word_count;  // ordered: deterministic
  for (const std::string& doc : corpus)
    for (std::string& w : basic.tokenize(doc)) ++word_count[w];

  // Every word as a sequence of symbol ids: first character, then "##"-prefixed ones.
  std::vector<std::string> symbols;
  std::unordered_map<std::string, int32_t> sym_id;
  auto intern = [&](const std::string& s) {
    auto [it, fresh] = sym_id.emplace(s, int32_t(symbols.size()));
    if (fresh) symbols.push_back(s);
    return it->second;
  };
  struct Word { std::vector<int32_t> syms; int64_t count; };
  std::vector<Word> words;
  for (const auto& [w, n] : word_count) {
    std::u32string cs = unicode::decode_utf8(w);
    if (int64_t(cs.size()) > kMaxInputCharsPerWord) continue;  // would encode as [UNK] anyway
    Word word{{}, n};
    for (size_t k = 0; k < cs.size(); ++k)
      word.syms.push_back(intern((k ? "##" : "") + unicode::encode_utf8(cs.substr(k, 1))));
    words.push_back(std::move(word));
  }
  // The alphabet by frequency (ties: byte order), after the specials.
  std::vector<int64_t> freq(symbols.size(), 0);
  for (const Word& w : words)
    for (int32_t s : w.syms) freq[size_t(s)] += w.count;
  std::vector<int32_t> order(symbols.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = int32_t(k);
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return freq[size_t(x)] != freq[size_t(y)] ? freq[size_t(x)] > freq[size_t(y)]
                                              : symbols[size_t(x)] < symbols[size_t(y)];
  });
  std::vector<std::string> vocab = special_tokens();
  for (int32_t s : order) vocab.push_back(symbols[size_t(s)]);

  // Merges: the pair (a, b) maximising count(ab) / (count(a) * count(b)), i.e. the merge that
  // raises the corpus likelihood under a unigram model of symbols the most (WordPiece).
  while (int64_t(vocab.size()) < vocab_size) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pair_count;
    std::unordered_map<int32_t, int64_t> sym_count;
    for (const Word& w : words) {
      for (size_t k = 0; k < w.syms.size(); ++k) {
        sym_count[w.syms[k]] += w.count;
        if (k + 1 < w.syms.size()) pair_count[{w.syms[k], w.syms[k + 1]}] += w.count;
      }
    }
    const std::pair<int32_t, int32_t>* best = nullptr;
    long double best_score = -1;
    int64_t best_n = 0;
    for (const auto& [p, n] : pair_count) {
      if (n < min_frequency) continue;
      long double score = (long double)n / ((long double)sym_count[p.first] * sym_count[p.second]);
      if (score > best_score || (score == best_score && n > best_n)) {
        best = &p; best_score = score; best_n = n;
      }
    }
    if (!best) break;  // nothing frequent enough left
    const std::string& b = symbols[size_t(best->second)];
    std::string merged = symbols[size_t(best->first)] + b.substr(b.rfind("##", 0) == 0 ? 2 : 0);
    bool fresh = !sym_id.count(merged);
    int32_t m = intern(merged);
    if (fresh) vocab.push_back(merged);
    int32_t x = best->first, y = best->second;
    for (Word& w : words) {  // apply the merge left to right
      std::vector<int32_t> next;
      next.reserve(w.syms.size());
      for (size_t k = 0; k < w.syms.size(); ++k) {
        if (k + 1 < w.syms.size() && w.syms[k] == x && w.syms[k + 1] == y) {
          next.push_back(m);
          ++k;
        } else {
          next.push_back(w.syms[k]);
        }
      }
      w.syms = std::move(next);
    }
  }
  return WordPieceTokenizer(std::move(vocab), options);
}

}  // namespace graft::data
