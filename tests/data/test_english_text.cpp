// The english-text corpus pieces (Bible chapters as documents, the one-sentence-per-line
// format) and the wordnet-lexname task (lexicographer file names, the fixed split, parsing a
// small WordNet data file, errors for malformed input).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "data/english_text.h"
#include "data/pairs.h"
#include "data/wordnet_lexnames.h"
#include "ops/error.h"

using namespace graft;
namespace fs = std::filesystem;

TEST_CASE("english text: Bible verses -> one document per chapter") {
  const std::vector<std::pair<std::string, std::string>> verses = {
      {"Genesis 1:1", "In the beginning."}, {"Genesis 1:2", "The earth was empty."},
      {"Genesis 2:1", "It was finished."}, {"1 Samuel 1:1", "There was a man."},
      {"1 Samuel 1:2", "He had two wives."}};
  const std::vector<std::string> docs = data::bible_chapters(verses);
  REQUIRE(docs.size() == 3);
  CHECK(docs[0] == "In the beginning. The earth was empty.");
  CHECK(docs[1] == "It was finished.");
  CHECK(docs[2] == "There was a man. He had two wives.");
}

TEST_CASE("english text: one sentence per line, a blank line after each document") {
  std::string out;
  auto [docs, sents] = data::write_documents(out, {"One. Two! Three?", "   ", "Four"});
  CHECK(docs == 2);  // the blank document is skipped
  CHECK(sents == 4);
  CHECK(out == "One.\nTwo!\nThree?\n\nFour\n\n");
}

TEST_CASE("wordnet lexnames: names, fixed split") {
  CHECK(data::lexname(0) == "adj.all");
  CHECK(data::lexname(3) == "noun.Tops");
  CHECK(data::lexname(5) == "noun.animal");
  CHECK(data::lexname(29) == "verb.body");
  CHECK(data::lexname(44) == "adj.ppl");
  CHECK_THROWS_AS(data::lexname(45), Error);
  CHECK_THROWS_AS(data::lexname(-1), Error);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 10000; ++i) ++counts[data::wordnet_split_of("n:" + std::to_string(10000000 + i))];
  CHECK(data::wordnet_split_of("n:00001740") == data::wordnet_split_of("n:00001740"));
  CHECK(counts[0] > 800);  // about 10% test, 10% dev, 80% train
  CHECK(counts[0] < 1200);
  CHECK(counts[1] > 800);
  CHECK(counts[1] < 1200);
}

namespace {

// A WordNet-format dict directory holding only data.noun: a licence line, then `lines`.
std::string fake_wordnet(const std::string& name, const std::vector<std::string>& lines) {
  const fs::path dir = fs::temp_directory_path() / ("graft_wn_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream out(dir / "data.noun");
  out << "  1 This software and database is being provided to you, the LICENSEE\n";
  for (const std::string& l : lines) out << l << "\n";
  return dir.string();
}

std::string synset_line(int64_t offset, int lexfile, const std::string& word, const std::string& gloss) {
  char head[64];
  std::snprintf(head, sizeof head, "%08lld %02d n 01 %s 0 000 | ", static_cast<long long>(offset),
                lexfile, word.c_str());
  return head + gloss;
}

}  // namespace

TEST_CASE("wordnet lexnames: glosses labelled by lexicographer file, split by synset") {
  std::vector<std::string> lines;
  for (int i = 0; i < 60; ++i)
    lines.push_back(synset_line(1000 + 37 * i, 3 + i % 5, "w" + std::to_string(i),
                                "gloss number " + std::to_string(i) + "; \"an example " +
                                    std::to_string(i) + "\""));
  const std::string dir = fake_wordnet("ok", lines);
  const data::LexnameSplits s = data::wordnet_lexname_task(dir);
  CHECK(s.train.size() + s.dev.size() + s.test.size() == 60);
  std::set<std::string> seen;
  for (const auto* split : {&s.train, &s.dev, &s.test})
    for (const data::LabeledText& x : *split) {
      const int i = std::stoi(x.text.substr(std::string("gloss number ").size()));
      CHECK(x.label == 3 + i % 5);
      CHECK(x.text == "gloss number " + std::to_string(i));  // the examples are not part of it
      seen.insert(x.text);
      const std::string key = "n:" + synset_line(1000 + 37 * i, 0, "", "").substr(0, 8);
      CHECK(data::wordnet_split_of(key) == (split == &s.test ? 0 : split == &s.dev ? 1 : 2));
    }
  CHECK(seen.size() == 60);
  const auto syn = data::read_wordnet_synsets(dir);
  REQUIRE(syn.size() == 60);
  CHECK(syn[0].examples == std::vector<std::string>{"an example 0"});
  fs::remove_all(dir);
}

TEST_CASE("wordnet lexnames: malformed files are graft::Errors") {
  const std::string bad_lex = fake_wordnet("badlex", {synset_line(1000, 3, "a", "x").replace(9, 2, "zz")});
  CHECK_THROWS_AS(data::read_wordnet_synsets(bad_lex), Error);
  const std::string out_of_range = fake_wordnet("range", {synset_line(1000, 60, "a", "x")});
  CHECK_THROWS_AS(data::wordnet_lexname_task(out_of_range), Error);
  const std::string no_bar = fake_wordnet("nobar", {"00001000 03 n 01 a 0 000 gloss without bar"});
  CHECK_THROWS_AS(data::read_wordnet_synsets(no_bar), Error);
  CHECK_THROWS_AS(data::read_wordnet_synsets("/nonexistent/wordnet"), Error);
  for (const auto& d : {bad_lex, out_of_range, no_bar}) fs::remove_all(d);
}
