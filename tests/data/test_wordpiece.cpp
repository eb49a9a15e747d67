// WordPiece tokenizer: ids from Hugging Face's BertTokenizer (fixtures written by
// tests/fixtures/make_wordpiece_fixtures.py), hand cases, vocab.txt I/O, Unicode helpers and
// vocabulary training.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/wordpiece.h"
#include "ops/error.h"

using namespace graft;
using namespace graft::data;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(GRAFT_FIXTURES) + "/wordpiece";

nlohmann::json load_expected() {
  std::ifstream f(kDir + "/expected.json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

BasicTokenizerOptions options_from(const nlohmann::json& o) {
  BasicTokenizerOptions opt;
  opt.lower_case = o.value("do_lower_case", true);
  if (o.contains("strip_accents")) opt.strip_accents = o["strip_accents"].get<bool>();
  opt.split_cjk = o.value("tokenize_chinese_chars", true);
  return opt;
}

std::string tmp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("graft_wp_" + std::to_string(getpid()) + "_" + name))
      .string();
}

WordPieceTokenizer tiny(std::vector<std::string> extra, BasicTokenizerOptions o = {}) {
  std::vector<std::string> v = WordPieceTokenizer::special_tokens();
  v.insert(v.end(), extra.begin(), extra.end());
  return WordPieceTokenizer(v, o);
}

}  // namespace

TEST_CASE("wordpiece: ids match Hugging Face BertTokenizer on the fixture sentences") {
  nlohmann::json ex = load_expected();
  REQUIRE(ex["cases"].size() >= 50);
  int64_t checked = 0;
  for (const auto& c : ex["cases"]) {
    auto tok = WordPieceTokenizer::load(kDir + "/vocab.txt", options_from(c["options"]));
    std::string text = c["text"];
    CAPTURE(text);
    CAPTURE(c["options"].dump());
    CHECK(tok.tokenize(text) == c["tokens"].get<std::vector<std::string>>());
    CHECK(tok.encode(text) == c["ids"].get<std::vector<int64_t>>());
    ++checked;
  }
  CHECK(checked == int64_t(ex["cases"].size()));
}

TEST_CASE("wordpiece: encode_pair matches Hugging Face longest-first truncation") {
  nlohmann::json ex = load_expected();
  auto tok = WordPieceTokenizer::load(kDir + "/vocab.txt");
  REQUIRE(ex["pairs"].size() >= 4);
  for (const auto& p : ex["pairs"]) {
    CAPTURE(p.dump());
    PairEncoding e = tok.encode_pair(p["a"].get<std::string>(), p["b"].get<std::string>(),
                                     p["max_len"].get<int64_t>());
    CHECK(e.input_ids == p["input_ids"].get<std::vector<int64_t>>());
    CHECK(e.token_type_ids == p["token_type_ids"].get<std::vector<int64_t>>());
  }
  CHECK_THROWS_AS(tok.encode_pair("a", "b", 2), Error);
}

TEST_CASE("wordpiece: greedy longest match, ## continuations, [UNK] and the length limit") {
  auto tok = tiny({"un", "unw", "##a", "##aff", "##affable", "##able", "##w", "a", "##b", "b"});
  CHECK(tok.wordpiece("unwaffable") == std::vector<std::string>{"unw", "##affable"});
  CHECK(tok.wordpiece("unaffable") == std::vector<std::string>{"un", "##affable"});
  CHECK(tok.wordpiece("unab") == std::vector<std::string>{"un", "##a", "##b"});
  CHECK(tok.wordpiece("unx") == std::vector<std::string>{"[UNK]"});  // one bad piece -> whole word
  CHECK(tok.wordpiece(std::string(100, 'a')).size() == 100);
  CHECK(tok.wordpiece(std::string(101, 'a')) == std::vector<std::string>{"[UNK]"});
  CHECK(tok.encode("b", true) == std::vector<int64_t>{tok.cls_id(), tok.token_to_id("b"),
                                                      tok.sep_id()});
  CHECK(tok.token_to_id("zzz") == tok.unk_id());
  CHECK(tok.decode(tok.encode("unwaffable, b")) == "unwaffable b");  // specials skipped, as HF
  CHECK(tok.decode(tok.encode("unwaffable, b", true), false) == "[CLS] unwaffable [UNK] b [SEP]");
  CHECK_THROWS_AS(tok.id_to_token(tok.size()), Error);
  CHECK_THROWS_AS(tok.id_to_token(-1), Error);
}

TEST_CASE("wordpiece: vocab.txt load/save round trip and bad vocabularies") {
  auto tok = tiny({"hello", "##s", "wörld", " spaced "});
  std::string path = tmp_path("vocab.txt");
  tok.save(path);
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(bytes == "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nwörld\n spaced \n");
  auto back = WordPieceTokenizer::load(path);
  CHECK(back.tokens() == tok.tokens());
  // CRLF lines, no final newline, a repeated token (the last line wins, as in BertTokenizer).
  {
    std::ofstream g(path, std::ios::binary);
    g << "[UNK]\r\n[PAD]\r\nx\r\n[CLS]\n[SEP]\n[MASK]\nx";
  }
  auto crlf = WordPieceTokenizer::load(path);
  CHECK(crlf.size() == 7);
  CHECK(crlf.unk_id() == 0);
  CHECK(crlf.pad_id() == 1);
  CHECK(crlf.token_to_id("x") == 6);
  {
    std::ofstream g(path, std::ios::binary);
    g << "[PAD]\n[CLS]\n[SEP]\n[MASK]\nword\n";
  }
  CHECK_THROWS_AS(WordPieceTokenizer::load(path), Error);  // no [UNK]
  fs::remove(path);
  CHECK_THROWS_AS(WordPieceTokenizer::load(path), Error);  // missing file
  CHECK_THROWS_AS(tiny({"bad\ntoken"}).save(path), Error);
}

TEST_CASE("wordpiece: Unicode helpers") {
  using namespace unicode;
  std::string s = "aé中😀";
  std::u32string u = decode_utf8(s);
  CHECK(u == std::u32string{U'a', 0xE9, 0x4E2D, 0x1F600});
  CHECK(encode_utf8(u) == s);
  CHECK(decode_utf8("\xC3") == std::u32string{0xFFFD});         // truncated
  CHECK(decode_utf8("\xC0\xAF") == std::u32string{0xFFFD, 0xFFFD});  // overlong
  CHECK(decode_utf8("\xED\xA0\x80").front() == 0xFFFD);         // surrogate
  CHECK(nfd(U"é") == std::u32string{U'e', 0x301});
  CHECK(nfd(std::u32string{0x1EBF}) == std::u32string{U'e', 0x302, 0x301});  // ế, two levels
  CHECK(nfc(std::u32string{U'e', 0x301, U'x'}) == std::u32string{0xE9, U'x'});
  CHECK(to_lower(U'Ä') == U'ä');
  CHECK(to_lower(0x141) == 0x142);  // Ł
  CHECK(to_lower(0x3A9) == 0x3C9);  // Ω
  CHECK(to_lower(0x42F) == 0x44F);  // Я
  CHECK(to_lower(0x101) == 0x101);  // already lower
  CHECK(to_lower(0x10400) == 0x10428);  // Deseret, plane 1
  CHECK(to_lower(0x1D400) == 0x1D400);  // math bold A has no lower case
  CHECK(lower(U"\u0130x") == std::u32string{U'i', 0x307, U'x'});  // one-to-many
  CHECK(nfd(U"\uD55C") == std::u32string{0x1112, 0x1161, 0x11AB});  // Hangul LVT syllable
  CHECK(nfc(std::u32string{0x1112, 0x1161, 0x11AB}) == U"\uD55C");
  CHECK(nfd(U"\U0001109A") == std::u32string{0x11099, 0x110BA});  // Kaithi, with a nukta
  CHECK(nfd(U"\U0002F800") == U"\u4E3D");  // CJK compatibility ideograph, plane 2
  CHECK(nfd(U"e\u0301\u0323") == std::u32string{U'e', 0x323, 0x301});  // canonical order
  CHECK(is_mark_nonspacing(0x11001));
  CHECK(is_mark_nonspacing(0xFE0F));
  CHECK_FALSE(is_mark_nonspacing(0x1F3FD));  // skin-tone modifier: Sk
  CHECK(is_punctuation(0x10100));
  CHECK(is_control(0x1D173));
  CHECK(is_control(0xE0067));   // tag character
  CHECK(is_control(0x100000));  // private use, plane 16
  CHECK_FALSE(is_control(0x378));  // unassigned: kept, as Hugging Face's Rust normaliser
  CHECK(is_whitespace(0x2028));
  CHECK(is_cjk(0x20000));
  CHECK_FALSE(is_cjk(0x2B820));
  CHECK(is_cjk(0x2B920));
  CHECK_FALSE(is_cjk(0x30000));
  CHECK(is_punctuation(U'!'));
  CHECK(is_punctuation(0x2014));  // em dash
  CHECK(is_punctuation(0x3002));  // ideographic full stop
  CHECK_FALSE(is_punctuation(U'a'));
  CHECK(is_punctuation(U'+'));  // ASCII symbols count, as in BERT
  CHECK(is_control(0x200B));
  CHECK_FALSE(is_control(U'\t'));
  CHECK(is_whitespace(0x3000));
  CHECK(is_cjk(0x4E2D));
  CHECK_FALSE(is_cjk(0x3042));  // hiragana is not split
  BasicTokenizer nfc_basic({.lower_case = false, .nfc = true});
  CHECK(nfc_basic.tokenize("cafe\xCC\x81!") == std::vector<std::string>{"café", "!"});
}

TEST_CASE("wordpiece: training puts specials first and merges by likelihood, not frequency") {
  // (e, ##a) occurs 3 times but e is common: score 3 / (12 * 3); (q, ##z) 2 / (2 * 2) wins.
  std::vector<std::string> corpus = {"ea eb ec ed", "ea eb ec ed", "ea eb ec ed", "qz qz"};
  auto tok = WordPieceTokenizer::train(corpus, 5 + 7 + 1);
  const auto& v = tok.tokens();
  REQUIRE(v.size() == 13);
  CHECK(std::vector<std::string>(v.begin(), v.begin() + 5) == WordPieceTokenizer::special_tokens());
  CHECK(v.back() == "qz");
  for (const char* sym : {"e", "##a", "##b", "##c", "##d", "q", "##z"})
    CHECK(tok.token_to_id(sym) != tok.unk_id());
  // A larger budget learns whole words; every corpus word encodes without [UNK].
  std::vector<std::string> text = {"the cat sat on the mat", "the dog sat on the log",
                                   "a cat and a dog", "The Cat, the hat!"};
  auto big = WordPieceTokenizer::train(text, 60);
  CHECK(big.size() <= 60);
  CHECK(big.tokenize("the cat") == std::vector<std::string>{"the", "cat"});
  for (const auto& line : text)
    for (int64_t id : big.encode(line)) CHECK(id != big.unk_id());
  CHECK(big.decode(big.encode("The Cat, the hat!")) == "the cat , the hat !");
  CHECK_THROWS_AS(WordPieceTokenizer::train(text, 5), Error);
}

TEST_CASE("wordpiece: arbitrary bytes tokenize without errors and decode to vocabulary tokens") {
  auto tok = WordPieceTokenizer::load(kDir + "/vocab.txt");
  uint64_t x = 88172645463325252ull;
  for (int round = 0; round < 300; ++round) {
    std::string s;
    for (int k = 0; k < 40; ++k) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      s.push_back(char(x % 4 == 0 ? 0x80 + (x >> 8) % 0x80 : 0x20 + (x >> 8) % 0x60));
    }
    std::vector<int64_t> ids = tok.encode(s);
    for (int64_t id : ids) CHECK((id >= 0 && id < tok.size()));
    CHECK(tok.tokenize(s).size() == ids.size());
  }
}
