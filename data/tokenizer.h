// Tokenizers for seq2seq: a Vocab (token <-> id, saved as a text file) and character- and
// word-level tokenizers over it. Ids 0..3 are always the specials <pad> <bos> <eos> <unk>;
// a token not in the vocabulary encodes as <unk> (never an error), an id outside the
// vocabulary raises graft::Error.
//
//   data::CharTokenizer tok = data::CharTokenizer::fit({"2021-03-03", "1999-12-31"});
//   std::vector<int64_t> ids = tok.encode("2021", /*bos=*/false, /*eos=*/true);
//   std::string s = tok.decode(ids);               // "2021" (specials dropped)
//   tok.vocab().save("vocab.txt");                 // one token per line, line number = id
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace graft::data {

inline constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;

class Vocab {
 public:
  Vocab();  // just the four specials
  // Adds `token` if new; returns its id.
  int64_t add(const std::string& token);
  // The id of `token`, kUnk when it is not in the vocabulary.
  int64_t id(const std::string& token) const;
  bool contains(const std::string& token) const { return index_.count(token) > 0; }
  // The token of `id`; graft::Error when id is outside [0, size).
  const std::string& token(int64_t id) const;
  int64_t size() const { return int64_t(tokens_.size()); }
  static bool is_special(int64_t id) { return id >= 0 && id <= kUnk; }

  // Text file: one token per line (backslash escapes \\ \n \t \r), line i holds id i; the first
  // four lines must be the specials. load() raises graft::Error for a missing file, bad
  // specials, a duplicate token or a bad escape.
  void save(const std::string& path) const;
  static Vocab load(const std::string& path);

  // Tokens seen at least min_freq times, most frequent first (ties: first seen), at most
  // max_size tokens in all (0 = no limit) including the specials.
  static Vocab build(const std::vector<std::vector<std::string>>& corpus, int64_t min_freq = 1,
                     int64_t max_size = 0);

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> index_;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text -> tokens, and tokens -> text (inverse of split for text without odd spacing).
  virtual std::vector<std::string> split(const std::string& text) const = 0;
  virtual std::string join(const std::vector<std::string>& tokens) const = 0;
  virtual std::string kind() const = 0;  // "char" or "word"

  std::vector<int64_t> encode(const std::string& text, bool bos = false, bool eos = false) const;
  // With skip_specials: stops at the first <eos> and drops <pad> and <bos> (<unk> stays, as
  // the text "<unk>"). graft::Error for an id outside the vocabulary.
  std::string decode(const std::vector<int64_t>& ids, bool skip_specials = true) const;
  std::vector<std::string> tokens(const std::vector<int64_t>& ids, bool skip_specials = true) const;

  const Vocab& vocab() const { return vocab_; }
  Vocab& vocab() { return vocab_; }

 protected:
  Vocab vocab_;
};

// One token per UTF-8 code point (an invalid byte becomes a one-byte token, never a crash).
class CharTokenizer : public Tokenizer {
 public:
  CharTokenizer() = default;
  explicit CharTokenizer(Vocab v) { vocab_ = std::move(v); }
  std::vector<std::string> split(const std::string& text) const override;
  std::string join(const std::vector<std::string>& tokens) const override;
  std::string kind() const override { return "char"; }
  static CharTokenizer fit(const std::vector<std::string>& texts, int64_t min_freq = 1,
                           int64_t max_size = 0);
};

// Whitespace-separated words; with split_punct, each ASCII punctuation character is a token
// of its own ("Hello, world." -> Hello , world .); with lowercase, ASCII letters are lowered.
class WordTokenizer : public Tokenizer {
 public:
  explicit WordTokenizer(bool lowercase = false, bool split_punct = true)
      : lowercase_(lowercase), split_punct_(split_punct) {}
  WordTokenizer(Vocab v, bool lowercase = false, bool split_punct = true)
      : lowercase_(lowercase), split_punct_(split_punct) { vocab_ = std::move(v); }
  std::vector<std::string> split(const std::string& text) const override;
  std::string join(const std::vector<std::string>& tokens) const override;
  std::string kind() const override { return "word"; }
  static WordTokenizer fit(const std::vector<std::string>& texts, bool lowercase = false,
                           bool split_punct = true, int64_t min_freq = 1, int64_t max_size = 0);
  bool lowercase() const { return lowercase_; }
  bool split_punct() const { return split_punct_; }

 private:
  bool lowercase_, split_punct_;
};

// "char" or "word" (graft::Error otherwise), with an empty vocabulary of specials.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, Vocab vocab = {});

}  // namespace graft::data
