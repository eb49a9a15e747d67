#include "data/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "data/text_io.h"
#include "data/token_lookup.h"
#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::data {

namespace {
const char* const kSpecials[] = {"<pad>", "<bos>", "<eos>", "<unk>"};

std::string escape(const std::string& t) {
  std::string out;
  for (char c : t) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

std::string unescape(const std::string& line, const std::string& path, int64_t lineno) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\') {
      out += line[i];
      continue;
    }
    GRAFT_CHECK(i + 1 < line.size(), "Vocab.load: {} line {}: a lone backslash at the end; hint: "
                "write \\\\ for a backslash", path, lineno);
    char c = line[++i];
    if (c == '\\') out += '\\';
    else if (c == 'n') out += '\n';
    else if (c == 't') out += '\t';
    else if (c == 'r') out += '\r';
    else GRAFT_CHECK(false, "Vocab.load: {} line {}: unknown escape '\\{}'; expected \\\\ \\n \\t "
                     "or \\r", path, lineno, printable(std::string_view(&c, 1)));
  }
  return out;
}

bool is_punct(unsigned char c) { return c < 128 && std::ispunct(c); }
}  // namespace

Vocab::Vocab() {
  for (const char* s : kSpecials) add(s);
}

int64_t Vocab::add(const std::string& token) {
  auto it = index_.find(token);
  if (it != index_.end()) return it->second;
  const int64_t id = size();
  tokens_.push_back(token);
  index_.emplace(token, id);
  return id;
}

int64_t Vocab::id(const std::string& token) const { return find_token_id(index_, token, kUnk); }

const std::string& Vocab::token(int64_t id) const {
  return token_of_id(tokens_, id, "Vocab.token",
                     "the model and the vocabulary file must come from the same run");
}

void Vocab::save(const std::string& path) const {
  std::string text;
  for (const std::string& t : tokens_) text += escape(t) + '\n';
  atomic_write(path, text, "Vocab.save");
}

Vocab Vocab::load(const std::string& path) {
  std::ifstream in = open_text_file(path, "Vocab.load", "a vocabulary file holds one token per "
                                    "line, the first four <pad> <bos> <eos> <unk>");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    strip_cr(line);  // CRLF line endings (save() writes a carriage return in a token escaped)
    if (lines.empty()) strip_bom(line);
    lines.push_back(unescape(line, path, int64_t(lines.size()) + 1));
  }
  GRAFT_CHECK(lines.size() >= 4, "Vocab.load: {} has {} lines; expected at least the 4 specials "
              "<pad> <bos> <eos> <unk>", path, lines.size());
  for (int i = 0; i < 4; ++i)
    GRAFT_CHECK(lines[size_t(i)] == kSpecials[i], "Vocab.load: {} line {} is '{}'; expected '{}' "
                "(ids 0..3 are <pad> <bos> <eos> <unk>)", path, i + 1,
                printable(lines[size_t(i)]), kSpecials[i]);
  Vocab v;
  for (size_t i = 4; i < lines.size(); ++i) {
    GRAFT_CHECK(!v.contains(lines[i]), "Vocab.load: {} line {}: token '{}' appears twice", path,
                i + 1, printable(lines[i]));
    v.add(lines[i]);
  }
  return v;
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& corpus, int64_t min_freq,
                   int64_t max_size) {
  GRAFT_CHECK(min_freq >= 1, "Vocab.build: min_freq must be >= 1, got {}", min_freq);
  GRAFT_CHECK(max_size == 0 || max_size >= 4, "Vocab.build: max_size must be 0 (no limit) or >= "
              "4 (the specials), got {}", max_size);
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> count;  // token -> (freq, first)
  int64_t order = 0;
  for (const auto& seq : corpus)
    for (const std::string& t : seq) {
      auto [it, fresh] = count.try_emplace(t, 0, order);
      if (fresh) ++order;
      ++it->second.first;
    }
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> items(count.begin(), count.end());
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first
                                            : a.second.second < b.second.second;
  });
  Vocab v;
  for (const auto& [tok, fc] : items) {
    if (fc.first < min_freq) break;
    if (max_size > 0 && v.size() >= max_size) break;
    v.add(tok);
  }
  return v;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool bos, bool eos) const {
  std::vector<int64_t> ids;
  if (bos) ids.push_back(kBos);
  for (const std::string& t : split(text)) ids.push_back(vocab_.id(t));
  if (eos) ids.push_back(kEos);
  return ids;
}

std::vector<std::string> Tokenizer::tokens(const std::vector<int64_t>& ids, bool skip_specials) const {
  std::vector<std::string> out;
  for (int64_t id : ids) {
    if (skip_specials) {
      if (id == kEos) break;
      if (id == kPad || id == kBos) continue;
    }
    out.push_back(vocab_.token(id));
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_specials) const {
  return join(tokens(ids, skip_specials));
}

std::vector<std::string> CharTokenizer::split(const std::string& text) const {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + n > text.size()) n = 1;
    for (size_t k = 1; k < n; ++k)  // continuation bytes must be 10xxxxxx
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) {
        n = 1;
        break;
      }
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string CharTokenizer::join(const std::vector<std::string>& tokens) const {
  std::string s;
  for (const auto& t : tokens) s += t;
  return s;
}

CharTokenizer CharTokenizer::fit(const std::vector<std::string>& texts, int64_t min_freq,
                                 int64_t max_size) {
  CharTokenizer tok;
  std::vector<std::vector<std::string>> corpus;
  corpus.reserve(texts.size());
  for (const auto& t : texts) corpus.push_back(tok.split(t));
  return CharTokenizer(Vocab::build(corpus, min_freq, max_size));
}

std::vector<std::string> WordTokenizer::split(const std::string& text) const {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 128 && std::isspace(c)) {
      flush();
    } else if (split_punct_ && is_punct(c)) {
      flush();
      out.emplace_back(1, ch);
    } else {
      cur += lowercase_ && c < 128 ? char(std::tolower(c)) : ch;
    }
  }
  flush();
  return out;
}

std::string WordTokenizer::join(const std::vector<std::string>& tokens) const {
  std::string s;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) s += ' ';
    s += tokens[i];
  }
  return s;
}

WordTokenizer WordTokenizer::fit(const std::vector<std::string>& texts, bool lowercase,
                                 bool split_punct, int64_t min_freq, int64_t max_size) {
  WordTokenizer tok(lowercase, split_punct);
  std::vector<std::vector<std::string>> corpus;
  corpus.reserve(texts.size());
  for (const auto& t : texts) corpus.push_back(tok.split(t));
  return WordTokenizer(Vocab::build(corpus, min_freq, max_size), lowercase, split_punct);
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, Vocab vocab) {
  if (kind == "char") return std::make_unique<CharTokenizer>(std::move(vocab));
  if (kind == "word") return std::make_unique<WordTokenizer>(std::move(vocab));
  throw Error(fmt::format("make_tokenizer: unknown kind '{}'; expected 'char' or 'word'", kind));
}

}  // namespace graft::data
