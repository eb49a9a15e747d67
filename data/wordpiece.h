// BERT's WordPiece tokenizer, compatible with Hugging Face's BertTokenizer (the Rust-backed one
// of transformers 5; see `nfc` for the pure-Python one of 4.x): a BasicTokenizer (clean-up,
// optional lower-casing and accent stripping, punctuation and CJK splitting) followed by greedy
// longest-match-first WordPiece with "##" continuations.
// vocab.txt is BertTokenizer's format: one token per line, id = line number (0-based).
//
//   auto tok = data::WordPieceTokenizer::load("vocab.txt");       // lower_case by default
//   std::vector<int64_t> ids = tok.encode("Héllo, world!");        // no [CLS]/[SEP]
//   data::PairEncoding e = tok.encode_pair("Who?", "Me.", 128);   // [CLS] A [SEP] B [SEP]
//   auto trained = data::WordPieceTokenizer::train(lines, 8000);  // specials first
//
// Unicode: categories (P*, Mn, Cc/Cf/Co, Zs/Zl/Zp), lower-case mappings and canonical
// decompositions come from utf8proc (Unicode 15 with Debian's 2.8), over the whole code space:
// Hangul syllables decompose into jamo when accents are stripped, as Hugging Face's do.
// Hugging Face's Rust tokenizers (transformers 5, the fixtures' reference) classify punctuation,
// marks and controls with older tables (about Unicode 8): characters of those classes assigned
// since then (e.g. U+1E94A ADLAM NUKTA, U+2E52 TIRONIAN SIGN CAPITAL ET) are stripped or split
// here but not there. Final-sigma context is not applied (Rust's per-character lower-casing
// does not either; Python's str.lower() does).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace graft::data {

struct BasicTokenizerOptions {
  bool lower_case = true;              // BertTokenizer(do_lower_case=...)
  std::optional<bool> strip_accents;   // unset: strip exactly when lower_case (as HF)
  bool split_cjk = true;               // tokenize_chinese_chars
  // NFC-normalise after clean-up, as transformers 4.x's pure-Python BertTokenizer did; the
  // Rust-backed BertTokenizer of transformers 5 (the fixtures' reference) does not.
  bool nfc = false;
};

// Text -> words: drops NUL/U+FFFD/control characters, maps whitespace to ' ', surrounds CJK
// ideographs with spaces, optionally NFC-normalises, then per whitespace-separated word: strips
// accents (NFD, drop Mn), lower-cases (in that order, as Hugging Face's Rust BertNormalizer) and
// splits every punctuation character into its own word.
// Words in never_split (e.g. "[MASK]") are kept verbatim.
class BasicTokenizer {
 public:
  explicit BasicTokenizer(BasicTokenizerOptions options = {},
                          std::vector<std::string> never_split = {});
  std::vector<std::string> tokenize(std::string_view text) const;
  const BasicTokenizerOptions& options() const { return options_; }

 private:
  BasicTokenizerOptions options_;
  std::vector<std::string> never_split_;
};

// Unicode helpers used by the tokenizer (exposed for tests).
namespace unicode {
std::u32string decode_utf8(std::string_view s);  // invalid bytes -> U+FFFD
std::string encode_utf8(std::u32string_view s);
bool is_punctuation(char32_t c);  // ASCII punctuation or a P* category
bool is_whitespace(char32_t c);   // ' ', \t, \n, \r, Zs, U+2028/2029
bool is_control(char32_t c);      // Cc/Cf/Co except \t \n \r (unassigned code points are kept)
bool is_cjk(char32_t c);          // the CJK ideograph blocks BERT splits (BMP and plane 2)
bool is_mark_nonspacing(char32_t c);  // Mn: combining marks, dropped when stripping accents
char32_t to_lower(char32_t c);              // simple (one-to-one) lower-case mapping
std::u32string lower(std::u32string_view s);  // full mapping: U+0130 -> i U+0307
std::u32string nfd(std::u32string_view s);  // canonical decomposition, canonically ordered
std::u32string nfc(std::u32string_view s);  // canonical decomposition + composition
}  // namespace unicode

// Token ids and segment ids (token_type_ids) of [CLS] A [SEP] B [SEP].
struct PairEncoding {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> token_type_ids;
};

class WordPieceTokenizer {
 public:
  static constexpr int64_t kMaxInputCharsPerWord = 100;
  // The five specials; train() puts them first, in this order.
  static const std::vector<std::string>& special_tokens();  // [PAD] [UNK] [CLS] [SEP] [MASK]

  // tokens[i] has id i; graft::Error for a duplicate or missing [UNK]/[CLS]/[SEP]/[PAD]/[MASK].
  explicit WordPieceTokenizer(std::vector<std::string> tokens, BasicTokenizerOptions options = {});
  static WordPieceTokenizer load(const std::string& vocab_path, BasicTokenizerOptions options = {});
  void save(const std::string& vocab_path) const;

  // A vocabulary of about vocab_size tokens (the alphabet is always kept whole) from a corpus (one string per document or line):
  // the specials, every character seen (word-initial and "##" forms), then greedy pair merges
  // chosen by the WordPiece likelihood score count(ab) / (count(a) * count(b)) (see docs/bert.md).
  static WordPieceTokenizer train(const std::vector<std::string>& corpus, int64_t vocab_size,
                                  BasicTokenizerOptions options = {}, int64_t min_frequency = 2);

  std::vector<std::string> tokenize(std::string_view text) const;  // word pieces
  std::vector<std::string> wordpiece(std::string_view word) const;  // one basic word
  // Ids of tokenize(text); with add_special_tokens, wrapped in [CLS] ... [SEP].
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // [CLS] A [SEP] B [SEP] with at most max_len ids, longest-first truncation from the ends as
  // Hugging Face's: with budget = max_len - 3, a side shorter than budget / 2 is kept whole and
  // the other cut to the rest, else the shorter side keeps floor(budget / 2) and the longer
  // (B on ties) the remainder. graft::Error when max_len < 3.
  PairEncoding encode_pair(std::string_view a, std::string_view b, int64_t max_len) const;
  // Tokens joined by spaces with "##" continuations glued; skip_special drops the five specials.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = true) const;

  int64_t token_to_id(const std::string& token) const;  // unk_id() when absent
  const std::string& id_to_token(int64_t id) const;     // graft::Error outside [0, size)
  int64_t size() const { return int64_t(tokens_.size()); }
  const std::vector<std::string>& tokens() const { return tokens_; }
  bool is_special(int64_t id) const;
  int64_t pad_id() const { return pad_; }
  int64_t unk_id() const { return unk_; }
  int64_t cls_id() const { return cls_; }
  int64_t sep_id() const { return sep_; }
  int64_t mask_id() const { return mask_; }
  const BasicTokenizer& basic() const { return basic_; }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> index_;
  BasicTokenizer basic_;
  int64_t pad_ = 0, unk_ = 0, cls_ = 0, sep_ = 0, mask_ = 0;
};

}  // namespace graft::data
