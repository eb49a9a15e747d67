// The english-text corpus (data/english_text.h): the World English Bible by chapter and WordNet
// glosses/examples by lexicographer file, one sentence per line.
#include "data/english_text.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "data/bert_pretraining.h"
#include "data/pairs.h"
#include "data/parallel_corpus.h"
#include "data/text_io.h"
#include "data/wordnet_lexnames.h"
#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWho = "prepare_english_text";

std::string run_command(const std::string& cmd, int& status) { return data::run_command(cmd, status, kWho); }

void write_atomic(const std::string& path, const std::string& text) { atomic_write(path, text, kWho); }

// Requires what `have` checks for; the library never installs anything itself, it says what
// is missing and how to get it (the ./graft wrapper installs these packages for you).
void ensure(const std::function<bool()>& have, const std::string& packages) {
  GRAFT_CHECK(have(), "prepare_english_text: needs the Debian packages {}, which are not "
              "installed; hint: sudo apt-get install {} (or run it as ./graft data prepare "
              "english-text, which installs them)", packages, packages);
}

}  // namespace

std::vector<std::string> bible_chapters(const std::vector<std::pair<std::string, std::string>>& verses) {
  std::vector<std::string> docs;
  std::string current;  // "Book C" of the open chapter
  for (const auto& [key, text] : verses) {
    const size_t colon = key.rfind(':');
    const std::string chapter = colon == std::string::npos ? key : key.substr(0, colon);
    if (docs.empty() || chapter != current) docs.emplace_back(), current = chapter;
    if (!docs.back().empty()) docs.back() += ' ';
    docs.back() += text;
  }
  return docs;
}

std::pair<int64_t, int64_t> write_documents(std::string& out, const std::vector<std::string>& documents) {
  int64_t docs = 0, sents = 0;
  for (const std::string& d : documents) {
    const std::vector<std::string> s = split_sentences(d);
    if (s.empty()) continue;
    for (const std::string& line : s) out += line, out += '\n';
    out += '\n';
    ++docs, sents += int64_t(s.size());
  }
  return {docs, sents};
}

EnglishTextInfo prepare_english_text(const std::string& data_dir, const std::string& wordnet_dir) {
  const std::string module = "engWEB2015eb";
  int st = 0;
  ensure([&] {
    run_command("command -v diatheke >/dev/null 2>&1", st);
    return st == 0 && run_command("diatheke -b system -k modulelist 2>/dev/null", st).find(module) != std::string::npos;
  }, "diatheke sword-text-web");
  ensure([&] { return fs::exists(fs::path(wordnet_dir) / "data.noun"); }, "wordnet-base");

  const std::string plain = run_command(
      fmt::format("diatheke -b {} -f plain -k 'Genesis 1:1-Revelation 22:21' 2>/dev/null", module), st);
  GRAFT_CHECK(st == 0, "prepare_english_text: diatheke -b {} failed (status {})", module, st);
  const std::vector<std::string> bible = bible_chapters(parse_diatheke(plain));
  GRAFT_CHECK(!bible.empty(), "prepare_english_text: diatheke gave no verses of {}", module);

  // WordNet: per lexicographer file, the glosses (with a final period) and examples of the
  // synsets outside the lexname task's dev/test splits.
  std::map<int64_t, std::string> by_lexfile;
  for (const WordNetSynset& s : read_wordnet_synsets(wordnet_dir)) {
    if (wordnet_split_of(s.key) != 2 || s.gloss.empty()) continue;
    std::string& doc = by_lexfile[s.lexfile];
    std::string g = s.gloss;
    g[0] = char(std::toupper(static_cast<unsigned char>(g[0])));
    doc += g + ".\n";
    for (const std::string& e : s.examples) doc += e + '\n';
  }
  std::vector<std::string> wordnet;
  for (auto& [lex, doc] : by_lexfile) wordnet.push_back(std::move(doc));

  EnglishTextInfo info;
  const fs::path dir = fs::path(data_dir) / "english-text";
  fs::create_directories(dir);
  info.path = (dir / "corpus.txt").string();
  std::string text;
  std::tie(info.bible_documents, info.bible_sentences) = write_documents(text, bible);
  std::tie(info.wordnet_documents, info.wordnet_sentences) = write_documents(text, wordnet);
  info.documents = info.bible_documents + info.wordnet_documents;
  info.sentences = info.bible_sentences + info.wordnet_sentences;
  info.bytes = int64_t(text.size());
  write_atomic(info.path, text);
  write_atomic((dir / "README.txt").string(), fmt::format(
      "english-text: an English corpus for BERT pretraining (graft data prepare english-text).\n"
      "Format: one sentence per line, a blank line after each document.\n\n"
      "1. World English Bible (SWORD module {}, Debian package sword-text-web): public domain.\n"
      "   One document per chapter: {} documents, {} sentences.\n"
      "2. WordNet 3.0 glosses and example sentences (Debian package wordnet-base), WordNet\n"
      "   licence (Princeton University; free use, this notice kept: \"WordNet 3.0 Copyright 2006\n"
      "   by Princeton University. All rights reserved.\"). One document per lexicographer file;\n"
      "   synsets of the wordnet-lexname dev/test splits left out: {} documents, {} sentences.\n\n"
      "Total: {} documents, {} sentences, {} bytes.\n", module, info.bible_documents,
      info.bible_sentences, info.wordnet_documents, info.wordnet_sentences, info.documents,
      info.sentences, info.bytes));
  return info;
}

}  // namespace graft::data
