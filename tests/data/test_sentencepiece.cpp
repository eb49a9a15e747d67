// data::SentencePieceTokenizer: subword pieces trained on a small corpus, exact round trips,
// the model saved and loaded again, and clear errors for bad arguments and broken files.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "data/sentencepiece.h"
#include "ops/error.h"
#include "ops/file_io.h"
#include "tests/temp_dir.h"

using namespace graft;
using namespace graft::data;

namespace {
std::vector<std::string> corpus() {
  std::vector<std::string> t;
  const char* words[] = {"beginning", "begin", "began", "heaven", "heavens", "earth", "earthly",
                         "light", "lights", "darkness", "dark", "water", "waters", "created"};
  for (int i = 0; i < 300; ++i)
    t.push_back(std::string("in the ") + words[i % 14] + " god " + words[(i * 5 + 3) % 14] + " the " +
                words[(i * 3 + 1) % 14]);
  return t;
}
}  // namespace

TEST_CASE("sentencepiece: fitted pieces split words into subwords and join back exactly") {
  for (const char* type : {"unigram", "bpe"}) {
    CAPTURE(type);
    auto tok = SentencePieceTokenizer::fit(corpus(), 40, type);
    CHECK(tok->kind() == "sentencepiece");
    CHECK(tok->vocab().size() <= 40);
    CHECK(tok->vocab().size() > 10);
    CHECK(tok->vocab().token(0) == "<pad>");
    // Fewer pieces than distinct words: some word is cut into pieces, and every text comes back.
    const std::string text = "in the beginning god created the heavens";
    const std::vector<std::string> pieces = tok->split(text);
    CHECK(pieces.size() > 7);
    CHECK(tok->join(pieces) == text);
    const std::vector<int64_t> ids = tok->encode(text, false, true);
    for (int64_t id : ids) CHECK(id != kUnk);
    CHECK(tok->decode(ids) == text);
    // A word never seen splits into known pieces (characters at worst), still exact.
    CHECK(tok->decode(tok->encode("the darkest heaven")) == "the darkest heaven");
  }
}

TEST_CASE("sentencepiece: save_model + load give the same pieces; broken inputs are errors") {
  graft::test::TempDir tmp("spm", "roundtrip");
  auto tok = SentencePieceTokenizer::fit(corpus(), 48);
  const std::string model = (tmp.dir / "src_spm.model").string(), vocab = (tmp.dir / "src_vocab.txt").string();
  tok->save_model(model);
  tok->vocab().save(vocab);
  auto back = SentencePieceTokenizer::load(model, Vocab::load(vocab));
  const std::string text = "the waters of the earth";
  CHECK(back->encode(text) == tok->encode(text));
  CHECK(back->split(text) == tok->split(text));

  // A vocabulary that lacks the model's pieces, a corrupt or missing model: graft::Error.
  CHECK_THROWS_WITH_AS(SentencePieceTokenizer::load(model, Vocab{}), doctest::Contains("do not belong together"), Error);
  atomic_write((tmp.dir / "bad.model").string(), std::string("not a model at all"));
  CHECK_THROWS_WITH_AS(SentencePieceTokenizer::load((tmp.dir / "bad.model").string(), Vocab::load(vocab)),
                       doctest::Contains("cannot load the model"), Error);
  CHECK_THROWS_AS(SentencePieceTokenizer::load((tmp.dir / "missing.model").string(), Vocab{}), Error);
  CHECK_THROWS_WITH_AS(SentencePieceTokenizer::fit(corpus(), 40, "wordpiece"), doctest::Contains("unigram or bpe"), Error);
  CHECK_THROWS_AS(SentencePieceTokenizer::fit(corpus(), 4), Error);
  CHECK_THROWS_AS(SentencePieceTokenizer::fit({}, 40), Error);
}
