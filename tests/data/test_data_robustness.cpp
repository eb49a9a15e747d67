// Hostile but fair input to the data readers: CRLF files, empty files, directories instead of
// files, duplicate tokens, TSV lines without a tab, ids outside the vocabulary, control
// characters in error messages, and sizes that made quadratic code hang (a 2M-token sentence
// pair, a text of 300k special tokens).
#include <doctest/doctest.h>

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/bert_pretraining.h"
#include "data/pairs.h"
#include "data/seq2seq_tasks.h"
#include "data/parallel_corpus.h"
#include "data/text_io.h"
#include "data/tokenizer.h"
#include "data/wordpiece.h"
#include "ops/error.h"
#include "tests/error_of.h"
#include "tests/temp_dir.h"

using namespace graft;
using graft::test::error_of;
using graft::test::has;
using namespace graft::data;
namespace fs = std::filesystem;

namespace {

// A fresh directory under /tmp for one test case, removed at the end.
struct TempDir : test::TempDir {
  explicit TempDir(const std::string& name) : test::TempDir("robust", name) {}
  std::string file(const std::string& name, const std::string& text) const {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};


std::string crlf(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

}  // namespace

TEST_CASE("text_io: printable escapes control characters; strip_cr drops one CR") {
  CHECK(printable("<pad>\r") == "<pad>\\r");
  CHECK(printable("a\tb\nc\\d\x01\x7f") == "a\\tb\\nc\\\\d\\x01\\x7f");
  CHECK(printable(std::string(100, 'x'), 10) == "xxxxxxxxxx...");
  CHECK(printable("h\xc3\xa9") == "h\xc3\xa9");  // UTF-8 stays readable
  CHECK(printable("\xEF\xBB\xBFx") == "\\ufeffx");  // but an invisible BOM is shown
  std::string s = "tok\r\r";
  strip_cr(s);
  CHECK(s == "tok\r");
}

TEST_CASE("Vocab.load reads CRLF files; char and word tokenizers work on them") {
  TempDir t("vocab_crlf");
  CharTokenizer ch = CharTokenizer::fit({"2021-03-03", "hello"});
  const std::string lf = (t.dir / "char.txt").string();
  ch.vocab().save(lf);
  std::ifstream in(lf, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Vocab v = Vocab::load(t.file("char_crlf.txt", crlf(text)));
  CHECK(v.size() == ch.vocab().size());
  for (int64_t i = 0; i < v.size(); ++i) CHECK(v.token(i) == ch.vocab().token(i));
  CharTokenizer back(v);
  CHECK(back.decode(back.encode("2021-03-03")) == "2021-03-03");

  const std::string words = crlf("<pad>\n<bos>\n<eos>\n<unk>\nhello\nworld\n");
  WordTokenizer w(Vocab::load(t.file("word_crlf.txt", words)));
  CHECK(w.encode("hello world") == std::vector<int64_t>{4, 5});
  CHECK(w.decode({4, 5, kEos}) == "hello world");
  // a carriage return inside a token is saved escaped, so it survives a CRLF conversion too
  Vocab cr;
  cr.add("a\rb");
  cr.save((t.dir / "cr.txt").string());
  std::ifstream in2((t.dir / "cr.txt").string(), std::ios::binary);
  const std::string t2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  CHECK(Vocab::load(t.file("cr_crlf.txt", crlf(t2))).token(4) == "a\rb");
}

TEST_CASE("Vocab.load errors show control characters escaped") {
  TempDir t("vocab_msg");
  const std::string e = error_of([&] { Vocab::load(t.file("v.txt", "<pa\x01" "d>\n<bos>\n<eos>\n<unk>\n")); });
  CHECK(has(e, "line 1 is '<pa\\x01d>'; expected '<pad>'"));
  const std::string tab = error_of([&] { Vocab::load(t.file("t.txt", "<pad>\t\n<bos>\n<eos>\n<unk>\n")); });
  CHECK(has(tab, "line 1 is '<pad>\\t'"));
  const std::string dup = error_of([&] { Vocab::load(t.file("d.txt", "<pad>\n<bos>\n<eos>\n<unk>\nx\x02\nx\x02\n")); });
  CHECK(has(dup, "line 6: token 'x\\x02' appears twice"));
}

TEST_CASE("WordPiece vocab.txt with CRLF line endings loads as with LF") {
  TempDir t("wp_crlf");
  const std::string lf = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nworld\n";
  const WordPieceTokenizer a = WordPieceTokenizer::load(t.file("lf.txt", lf));
  const WordPieceTokenizer b = WordPieceTokenizer::load(t.file("crlf.txt", crlf(lf)));
  CHECK(a.tokens() == b.tokens());
  CHECK(b.encode("hellos world") == std::vector<int64_t>{5, 6, 7});
  CHECK(b.token_to_id("world") == 7);
}

TEST_CASE("empty files and directories give clear errors") {
  TempDir t("empty");
  const std::string empty = t.file("empty.txt", "");
  CHECK(has(error_of([&] { Vocab::load(empty); }), "has 0 lines"));
  CHECK(has(error_of([&] { WordPieceTokenizer::load(empty); }), "has no [PAD]"));
  CHECK(has(error_of([&] { read_parallel_tsv(empty); }), "holds no pairs"));
  CHECK(has(error_of([&] { read_parallel_tsv(t.file("header.tsv", "key\ten\tes\n\n")); }), "holds no pairs"));
  CHECK(read_pairs_tsv(empty).empty());  // an empty split is valid data
  const std::string dir = t.dir.string();
  CHECK(has(error_of([&] { Vocab::load(dir); }), "is a directory"));
  CHECK(has(error_of([&] { WordPieceTokenizer::load(dir); }), "is a directory"));
  CHECK(has(error_of([&] { read_parallel_tsv(dir); }), "is a directory"));
  CHECK(has(error_of([&] { read_pairs_tsv(dir); }), "is a directory"));
  CHECK(has(error_of([&] { Vocab::load(dir + "/missing.txt"); }), "No such file"));
}

TEST_CASE("duplicate tokens: Vocab refuses them, WordPiece maps to the last line as BERT") {
  TempDir t("dups");
  CHECK(has(error_of([&] { Vocab::load(t.file("v.txt", "<pad>\n<bos>\n<eos>\n<unk>\na\na\n")); }), "appears twice"));
  CHECK_THROWS_AS(Vocab::load(t.file("v2.txt", "<pad>\n<pad>\n<eos>\n<unk>\n")), Error);
  const WordPieceTokenizer w = WordPieceTokenizer::load(
      t.file("wp.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nab\nab\n[UNK]\n"));
  CHECK(w.token_to_id("ab") == 6);
  CHECK(w.unk_id() == 7);
  CHECK(w.encode("ab zz") == std::vector<int64_t>{6, 7});
  CHECK(w.decode({5, 6}) == "ab ab");
}

TEST_CASE("TSV readers: CRLF lines, lines without a tab") {
  TempDir t("tsv");
  const auto p = read_parallel_tsv(t.file("p.tsv", crlf("hello\thola\nbye\tadios\n")));
  REQUIRE(p.size() == 2);
  CHECK(p[1].target == "adios");
  const std::string e = error_of([&] { read_parallel_tsv(t.file("bad.tsv", "hello hola\x01\n")); });
  CHECK(has(e, "line 1 has no tab: 'hello hola\\x01'"));
  const auto q = read_pairs_tsv(t.file("q.tsv", crlf("1\ta b\tc d\n0\te\tf\n")));
  REQUIRE(q.size() == 2);
  CHECK(q[0].b == std::vector<std::string>{"c", "d"});  // not "d\r"
  CHECK(q[1].label == 0);
  CHECK(q[1].b == std::vector<std::string>{"f"});
  CHECK(has(error_of([&] { read_pairs_tsv(t.file("r.tsv", "1 a b c\n")); }), "got '1 a b c'"));
}

TEST_CASE("decode refuses ids outside the vocabulary") {
  CharTokenizer ch = CharTokenizer::fit({"abc"});
  CHECK(has(error_of([&] { ch.decode({4, 99}); }), "id 99 is outside the vocabulary"));
  CHECK_THROWS_AS(ch.decode({-1}), Error);
  CHECK_THROWS_AS(ch.tokens({int64_t(1) << 62}), Error);
  WordPieceTokenizer w(WordPieceTokenizer::special_tokens());
  CHECK_THROWS_AS(w.decode({5}), Error);
  CHECK_THROWS_AS(w.decode({-100}), Error);
}

TEST_CASE("split_documents reads CRLF text") {
  const auto docs = split_documents("One. Two.\r\n\r\nThree.\r\n");
  REQUIRE(docs.size() == 2);
  CHECK(split_sentences(docs[0]) == std::vector<std::string>{"One.", "Two."});
  CHECK(split_sentences(docs[1]) == std::vector<std::string>{"Three."});
}

namespace {
// The obvious form of truncate_pair, on deques (O(1) at both ends): the same draws, the same
// decisions, so it must give the same result.
void truncate_reference(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens,
                        std::mt19937_64& rng) {
  std::deque<int64_t> da(a.begin(), a.end()), db(b.begin(), b.end());
  while (da.size() + db.size() > max_tokens) {
    std::deque<int64_t>& t = da.size() > db.size() ? da : db;
    if (double(rng() >> 11) * 0x1.0p-53 < 0.5) t.pop_front();
    else t.pop_back();
  }
  a.assign(da.begin(), da.end());
  b.assign(db.begin(), db.end());
}
}  // namespace

TEST_CASE("truncate_pair matches the reference, small and 2M tokens (linear time)") {
  for (size_t na : {0, 1, 7, 40}) {
    for (size_t nb : {0, 3, 40}) {
      for (size_t max : {0, 1, 10, 100}) {
        std::vector<int64_t> a(na), b(nb);
        for (size_t i = 0; i < na; ++i) a[i] = int64_t(i);
        for (size_t i = 0; i < nb; ++i) b[i] = 1000 + int64_t(i);
        std::vector<int64_t> ra = a, rb = b;
        std::mt19937_64 g1(na * 131 + nb * 7 + max), g2(na * 131 + nb * 7 + max);
        truncate_pair(a, b, max, g1);
        truncate_reference(ra, rb, max, g2);
        CHECK(a == ra);
        CHECK(b == rb);
        CHECK(a.size() + b.size() == std::min(na + nb, max));
        CHECK(g1() == g2());  // the same number of draws
      }
    }
  }
  // One 2M-token sentence against a short one: erasing at the front one token at a time
  // would move ~10^12 tokens (hours); the linear version takes milliseconds.
  std::vector<int64_t> a(2'000'000), b(50);
  for (size_t i = 0; i < a.size(); ++i) a[i] = int64_t(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -int64_t(i) - 1;
  std::vector<int64_t> ra = a, rb = b;
  std::mt19937_64 g1(7), g2(7);
  truncate_pair(a, b, 125, g1);
  truncate_reference(ra, rb, 125, g2);
  CHECK(a.size() + b.size() == 125);
  CHECK(a == ra);
  CHECK(b == rb);
}

TEST_CASE("create_pretraining_examples on a document with a 2M-token sentence") {
  std::vector<std::string> v = WordPieceTokenizer::special_tokens();
  for (int k = 0; k < 50; ++k) v.push_back(fmt::format("w{}", k));
  const WordPieceTokenizer tok(v);
  std::vector<int64_t> huge(2'000'000);
  for (size_t i = 0; i < huge.size(); ++i) huge[i] = 5 + int64_t(i % 50);
  const std::vector<TokenizedDocument> docs = {{huge, {5, 6, 7}}, {{8, 9}, {10, 11, 12}}};
  const auto ex = create_pretraining_examples(docs, tok, {.max_seq_len = 64, .seed = 3});
  REQUIRE(!ex.empty());
  for (const BertExample& e : ex) {
    CHECK(e.input_ids.size() <= 64);
    CHECK(e.input_ids.front() == tok.cls_id());
  }
}

TEST_CASE("WordPiece tokenize: a text of 300k special tokens in linear time") {
  // Looking every special up again from each match was quadratic in the matches (minutes).
  const WordPieceTokenizer tok(WordPieceTokenizer::special_tokens());
  std::string text;
  for (int i = 0; i < 300'000; ++i) text += i % 3 == 2 ? "[SEP] " : "[MASK] ";
  const std::vector<int64_t> ids = tok.encode(text);
  REQUIRE(ids.size() == 300'000);
  CHECK(ids[0] == tok.mask_id());
  CHECK(ids[2] == tok.sep_id());
  CHECK(ids[299'999] == tok.sep_id());
  CHECK(tok.tokenize("a[MASK]b[PAD][MASK]") ==
        std::vector<std::string>{"[UNK]", "[MASK]", "[UNK]", "[PAD]", "[MASK]"});
}

TEST_CASE("sizes that cannot fit in memory are errors before anything is allocated") {
  Generator g(1);
  const std::string e = error_of([&] { make_task("copy", int64_t(1) << 40, {}, g); });
  CHECK(has(e, "make_task(copy): 1099511627776 examples need at least"));
  CHECK(make_task("copy", 3, {}, g).size() == 3);
  const std::vector<SentencePair> pairs = synthetic_pairs(2, 1);
  const PairVocab v = PairVocab::build(pairs);
  CHECK(has(error_of([&] { make_pair_batch(pairs, {0, 1}, v, int64_t(1) << 40); }), "cannot allocate"));
  const PairBatch b = make_pair_batch(pairs, {0, 1}, v, 3);
  CHECK(b.a.shape() == Shape{2, 3});
  CHECK(b.a.to_vector<int64_t>()[0] == v.id(pairs[0].a[0]));
}

TEST_CASE("a UTF-8 byte order mark at the start of a file is ignored") {
  TempDir t("bom");
  const std::string bom = "\xEF\xBB\xBF";
  const Vocab v = Vocab::load(t.file("v.txt", bom + crlf("<pad>\n<bos>\n<eos>\n<unk>\nx\n")));
  CHECK(v.token(0) == "<pad>");
  CHECK(v.id("x") == 4);
  const WordPieceTokenizer w =
      WordPieceTokenizer::load(t.file("wp.txt", bom + "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhi\n"));
  CHECK(w.pad_id() == 0);
  CHECK(w.encode("hi") == std::vector<int64_t>{5});
  const auto p = read_parallel_tsv(t.file("p.tsv", bom + "key\ten\tes\na\tb\n"));
  REQUIRE(p.size() == 1);  // the header is recognised behind the mark
  CHECK(p[0].source == "a");
  const auto q = read_pairs_tsv(t.file("q.tsv", bom + "1\ta\tb\n"));
  REQUIRE(q.size() == 1);
  CHECK(q[0].label == 1);
  std::string s = "\xEF\xBB";  // a truncated mark is kept
  strip_bom(s);
  CHECK(s == "\xEF\xBB");
}

TEST_CASE("wordnet_gloss_pairs: one synset with a gloss is an error, not an endless draw") {
  // The negative of an example is another synset's gloss; with a single synset there is none.
  TempDir t("wordnet_one_synset");
  t.file("data.noun", "00001740 03 n 01 entity 0 000 | a thing; \"an example\"\n");
  CHECK(has(error_of([&] { wordnet_gloss_pairs(t.dir.string()); }), "at least two synsets"));
}

TEST_CASE("read_wordnet_synsets: a lexicographer file number that is not two digits is an error") {
  // A negative number passed std::stoll and reached the lexname task as a label of -3.
  TempDir t("wordnet_bad_lexfile");
  const std::string rest = " n 01 entity 0 000 | a thing; \"an example\"\n";
  for (const char* bad : {"-3", "7x", "100", "+1"}) {
    t.file("data.noun", std::string("00001740 ") + bad + rest);
    CHECK(has(error_of([&] { read_wordnet_synsets(t.dir.string()); }), "bad lexicographer file number"));
  }
  t.file("data.noun", "00001740 03" + rest);
  const auto s = read_wordnet_synsets(t.dir.string());
  REQUIRE(s.size() == 1);
  CHECK(s[0].lexfile == 3);
}
