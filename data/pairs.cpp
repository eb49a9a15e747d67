// Sentence pairs: WordNet gloss matching, TSV files, a synthetic task, vocabulary, batches.
#include "data/pairs.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "data/text_io.h"
#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::data {

namespace fs = std::filesystem;

std::vector<std::string> tokenize_words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    while (!cur.empty() && cur.back() == '\'') cur.pop_back();  // "students'" -> "students"
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (unsigned char ch : text) {
    if (std::isalnum(ch) || (ch == '\'' && !cur.empty()) || ch >= 0x80) {
      cur.push_back(char(ch >= 0x80 ? ch : std::tolower(ch)));
    } else {
      flush();
    }
  }
  flush();
  return out;
}

namespace {

using Synset = WordNetSynset;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One data.* line -> synset (false for the licence header and blank lines).
bool parse_line(const std::string& line, const std::string& path, int64_t line_no, Synset& s) {
  if (line.empty() || line[0] == ' ') return false;
  const size_t bar = line.find(" | ");
  GRAFT_CHECK(bar != std::string::npos, "wordnet: {}:{}: no ' | ' before the gloss; hint: is this "
              "a WordNet 3.0 data file (wordnet-base)?", path, line_no);
  std::istringstream head(line.substr(0, bar));
  std::string offset, lexfile, pos, wcnt_hex;
  head >> offset >> lexfile >> pos >> wcnt_hex;
  GRAFT_CHECK(!offset.empty() && !pos.empty() && !wcnt_hex.empty(),
              "wordnet: {}:{}: truncated synset header", path, line_no);
  int64_t wcnt = 0;
  try {
    wcnt = std::stoll(wcnt_hex, nullptr, 16);
  } catch (const std::exception&) {
    throw Error(fmt::format("wordnet: {}:{}: bad word count '{}'", path, line_no, wcnt_hex));
  }
  GRAFT_CHECK(wcnt >= 1 && wcnt <= 1000, "wordnet: {}:{}: bad word count {}", path, line_no, wcnt);
  s = Synset{};
  s.key = (pos == "s" ? std::string("a") : pos) + ":" + offset;
  // lex_filenum is a two-digit decimal number (wndb(5WN)); "-3" or "7x" is a corrupt line.
  const bool digits = !lexfile.empty() && lexfile.size() <= 2 &&
                      std::all_of(lexfile.begin(), lexfile.end(), [](unsigned char c) { return std::isdigit(c); });
  GRAFT_CHECK(digits, "wordnet: {}:{}: bad lexicographer file number '{}' (two decimal digits "
              "expected)", path, line_no, lexfile);
  s.lexfile = std::stoll(lexfile);
  for (int64_t i = 0; i < wcnt; ++i) {
    std::string w, lex_id;
    GRAFT_CHECK(bool(head >> w >> lex_id), "wordnet: {}:{}: {} words announced, fewer found",
                path, line_no, wcnt);
    const size_t paren = w.find('(');  // adjective markers: "long(a)"
    if (paren != std::string::npos) w = w.substr(0, paren);
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    s.words.push_back(w);
  }
  const std::string gloss = line.substr(bar + 3);
  const size_t q = gloss.find('"');
  std::string def = gloss.substr(0, q);
  while (!def.empty() && (def.back() == ' ' || def.back() == ';')) def.pop_back();
  s.gloss = def;
  for (size_t p = q; p != std::string::npos;) {
    const size_t e = gloss.find('"', p + 1);
    if (e == std::string::npos) break;
    s.examples.push_back(gloss.substr(p + 1, e - p - 1));
    p = gloss.find('"', e + 1);
  }
  return true;
}

std::string join(const std::vector<std::string>& t) {
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) s += (i ? " " : "") + t[i];
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty() || sep == '\t') out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty() || sep == '\t') out.push_back(cur);
  return out;
}

// f(path, synsets) for each of WordNet's data files under dir (data.noun, .verb, .adj, .adv)
// that opens, with the synsets it holds in file order; graft::Error when none opens.
template <class F> void for_each_data_file(const std::string& dir, F&& f) {
  int files = 0;
  for (const char* part : {"noun", "verb", "adj", "adv"}) {
    const std::string path = (fs::path(dir) / (std::string("data.") + part)).string();
    std::ifstream in(path);
    if (!in) continue;
    ++files;
    std::vector<Synset> syns;
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      strip_cr(line);
      Synset s;
      if (parse_line(line, path, ++line_no, s)) syns.push_back(std::move(s));
    }
    f(path, std::move(syns));
  }
  GRAFT_CHECK(files > 0, "wordnet: no data.noun/verb/adj/adv under {}; hint: apt-get install "
              "wordnet-base (or pass the directory that holds WordNet's data.* files)", dir);
}

}  // namespace

std::vector<WordNetSynset> read_wordnet_synsets(const std::string& dir) {
  std::vector<WordNetSynset> out;
  for_each_data_file(dir, [&](const std::string&, std::vector<Synset> syns) {
    std::move(syns.begin(), syns.end(), std::back_inserter(out));
  });
  return out;
}

PairSplits wordnet_gloss_pairs(const std::string& dir, uint64_t seed) {
  PairSplits splits;
  std::mt19937_64 rng(seed);
  for_each_data_file(dir, [&](const std::string& path, std::vector<Synset> syns) {
    std::erase_if(syns, [](const Synset& s) { return tokenize_words(s.gloss).empty(); });
    // lemma -> the synsets (indices) it appears in: other senses of the same word
    std::map<std::string, std::vector<size_t>> senses;
    for (size_t i = 0; i < syns.size(); ++i)
      for (const std::string& w : syns[i].words) senses[w].push_back(i);
    for (size_t i = 0; i < syns.size(); ++i) {
      const Synset& s = syns[i];
      if (s.examples.empty()) continue;
      const uint64_t bucket = fnv1a(s.key) % 10;
      std::vector<SentencePair>& out = bucket == 0 ? splits.test : bucket == 1 ? splits.dev : splits.train;
      std::vector<size_t> hard;
      for (const std::string& w : s.words)
        for (size_t j : senses[w])
          if (j != i && std::find(hard.begin(), hard.end(), j) == hard.end()) hard.push_back(j);
      const std::vector<std::string> gloss = tokenize_words(s.gloss);
      for (const std::string& ex : s.examples) {
        std::vector<std::string> a = tokenize_words(ex);
        if (a.empty()) continue;
        out.push_back({a, gloss, 1});
        size_t j = i;
        if (!hard.empty() && rng() % 2 == 0) {
          j = hard[rng() % hard.size()];
        } else {
          GRAFT_CHECK(syns.size() >= 2, "wordnet: {} holds one synset with a gloss; the task needs "
                      "at least two synsets (a negative is another synset's gloss)", path);
          while (j == i) j = size_t(rng() % syns.size());
        }
        out.push_back({a, tokenize_words(syns[j].gloss), 0});
      }
    }
  });
  GRAFT_CHECK(!splits.train.empty() && !splits.test.empty(),
              "wordnet: {} holds no synsets with example sentences", dir);
  return splits;
}

void write_pairs_tsv(const std::string& path, const std::vector<SentencePair>& pairs) {
  std::string text;
  for (const SentencePair& p : pairs) text += fmt::format("{}\t{}\t{}\n", p.label, join(p.a), join(p.b));
  atomic_write(path, text, "pairs");
}

std::vector<SentencePair> read_pairs_tsv(const std::string& path) {
  std::ifstream in = open_text_file(path, "pairs", "run graft train abcnn once to prepare the "
                                    "data, or delete the directory to rebuild it");
  std::vector<SentencePair> out;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    strip_cr(line);
    if (line_no == 1) strip_bom(line);
    if (line.empty()) continue;
    const std::vector<std::string> f = split(line, '\t');
    GRAFT_CHECK(f.size() == 3 && (f[0] == "0" || f[0] == "1"),
                "pairs: {}:{}: expected 'label<TAB>sentence<TAB>sentence' with label 0 or 1, "
                "got '{}'", path, line_no, printable(line));
    SentencePair p{split(f[1], ' '), split(f[2], ' '), f[0] == "1" ? 1 : 0};
    GRAFT_CHECK(!p.a.empty() && !p.b.empty(), "pairs: {}:{}: empty sentence", path, line_no);
    out.push_back(std::move(p));
  }
  return out;
}

PairSplits prepare_wordnet_pairs(const std::string& wordnet_dir, const std::string& out_dir,
                                 uint64_t seed) {
  const fs::path d(out_dir);
  const char* names[3] = {"train.tsv", "dev.tsv", "test.tsv"};
  std::error_code ec;
  bool have = true;
  for (const char* n : names) have = have && fs::is_regular_file(d / n, ec);
  if (!have) {
    PairSplits s = wordnet_gloss_pairs(wordnet_dir, seed);
    fs::create_directories(d, ec);
    GRAFT_CHECK(!ec, "pairs: cannot create {}: {}", out_dir, ec.message());
    write_pairs_tsv((d / names[0]).string(), s.train);
    write_pairs_tsv((d / names[1]).string(), s.dev);
    write_pairs_tsv((d / names[2]).string(), s.test);
  }
  return {read_pairs_tsv((d / names[0]).string()), read_pairs_tsv((d / names[1]).string()),
          read_pairs_tsv((d / names[2]).string())};
}

std::vector<SentencePair> synthetic_pairs(int64_t n, uint64_t seed, int64_t vocab) {
  GRAFT_CHECK(n >= 0 && vocab >= 8, "synthetic_pairs: n {} must be >= 0 and vocab {} >= 8", n, vocab);
  std::mt19937_64 rng(seed);
  auto word = [&] { return fmt::format("w{}", rng() % uint64_t(vocab)); };
  std::vector<SentencePair> out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = 4 + int64_t(rng() % 4);
    SentencePair p;
    for (int64_t j = 0; j < len; ++j) p.a.push_back(word());
    p.label = i % 2;
    if (p.label) {
      p.b = p.a;
      std::shuffle(p.b.begin(), p.b.end(), rng);
      p.b[rng() % p.b.size()] = word();
    } else {
      const int64_t lb = 4 + int64_t(rng() % 4);
      for (int64_t j = 0; j < lb; ++j) p.b.push_back(word());
    }
    out.push_back(std::move(p));
  }
  return out;
}

PairVocab PairVocab::build(const std::vector<SentencePair>& pairs, int64_t min_count) {
  std::unordered_map<std::string, int64_t> counts;
  for (const SentencePair& p : pairs) {
    for (const auto& w : p.a) ++counts[w];
    for (const auto& w : p.b) ++counts[w];
  }
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  PairVocab v;
  for (const auto& [w, c] : sorted) {
    if (c < min_count) break;
    v.index_[w] = int64_t(v.words_.size());
    v.words_.push_back(w);
  }
  return v;
}

PairVocab PairVocab::from_words(std::vector<std::string> words) {
  GRAFT_CHECK(words.size() >= 2 && words[0] == "<pad>" && words[1] == "<unk>", "PairVocab: the "
              "first two words must be <pad> and <unk> (ids {} and {})", kPad, kUnk);
  PairVocab v;
  v.words_ = std::move(words);
  for (size_t i = 2; i < v.words_.size(); ++i) {  // (build() does not index the two specials)
    GRAFT_CHECK(!v.words_[i].empty(), "PairVocab: word {} is empty", i);
    GRAFT_CHECK(v.index_.emplace(v.words_[i], int64_t(i)).second, "PairVocab: '{}' is both word "
                "{} and word {}", v.words_[i], v.index_[v.words_[i]], i);
  }
  return v;
}

int64_t PairVocab::id(const std::string& w) const {
  auto it = index_.find(w);
  return it == index_.end() ? kUnk : it->second;
}

const std::string& PairVocab::word(int64_t id) const {
  GRAFT_CHECK(id >= 0 && id < size(), "PairVocab: id {} out of range [0, {})", id, size());
  return words_[size_t(id)];
}

PairBatch make_pair_batch(const std::vector<SentencePair>& pairs,
                          const std::vector<int64_t>& indices, const PairVocab& vocab,
                          int64_t S) {
  GRAFT_CHECK(S >= 1, "make_pair_batch: max_len must be >= 1, got {}", S);
  GRAFT_CHECK(!indices.empty(), "make_pair_batch: empty batch");
  const int64_t B = int64_t(indices.size());
  PairBatch out;
  // The batch tensors first, filled in place: their allocation checks the sizes (a clear error
  // for a huge max_len, where host vectors of B S ids would throw std::bad_alloc).
  out.a = full({B, S}, double(PairVocab::kPad), DType::i64);
  out.b = full({B, S}, double(PairVocab::kPad), DType::i64);
  int64_t* a = out.a.data<int64_t>();
  int64_t* b = out.b.data<int64_t>();
  std::vector<int64_t> y;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t k = indices[size_t(i)];
    GRAFT_CHECK(k >= 0 && k < int64_t(pairs.size()), "make_pair_batch: index {} out of range "
                "[0, {})", k, pairs.size());
    const SentencePair& p = pairs[size_t(k)];
    const int64_t la = std::min<int64_t>(S, int64_t(p.a.size())), lb = std::min<int64_t>(S, int64_t(p.b.size()));
    for (int64_t t = 0; t < la; ++t) a[size_t(i * S + t)] = vocab.id(p.a[size_t(t)]);
    for (int64_t t = 0; t < lb; ++t) b[size_t(i * S + t)] = vocab.id(p.b[size_t(t)]);
    out.len_a.push_back(la);
    out.len_b.push_back(lb);
    y.push_back(p.label);
  }
  out.label = from_vector(y, {B});
  return out;
}

}  // namespace graft::data
