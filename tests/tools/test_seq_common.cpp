// tools/seq_common.h: the tokenizers and translation helpers that `graft train seq2seq` and
// `graft train transformer` share.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "tests/temp_dir.h"
#include "tools/seq_common.h"

using namespace graft;

TEST_CASE("seq_common: fit_tokenizer keeps at most max_size tokens for both kinds") {
  const std::vector<std::string> texts = {"abc abd abe", "xyz qrs", "the cat, the dog."};
  for (const char* kind : {"char", "word"}) {
    CAPTURE(kind);
    const auto all = tools::fit_tokenizer(kind, texts, 0);
    REQUIRE(all->vocab().size() > 7);
    const auto few = tools::fit_tokenizer(kind, texts, 7);  // 4 specials + the 3 most frequent
    CHECK(few->vocab().size() == 7);
    CHECK(few->kind() == kind);
  }
  // The most frequent character survives the cut, a rare one becomes <unk>.
  const auto c = tools::fit_tokenizer("char", texts, 6);
  const std::vector<int64_t> ids = c->encode("az");
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] != data::kUnk);
  CHECK(ids[1] == data::kUnk);
}

TEST_CASE("seq_common: a saved vocabulary loads back as the same tokenizer") {
  test::TempDir tmp("seq_common");
  const auto word = tools::fit_tokenizer("word", {"Hello, World.", "hello again"}, 0);
  word->vocab().save(tmp / "vocab.txt");
  const auto back = tools::load_tokenizer("word", tmp / "vocab.txt");
  CHECK(back->vocab().size() == word->vocab().size());
  CHECK(back->encode("HELLO, world") == word->encode("hello, world"));  // lowercased, as fitted
  const auto chars = tools::fit_tokenizer("char", {"ab"}, 0);
  chars->vocab().save(tmp / "chars.txt");
  CHECK(tools::load_tokenizer("char", tmp / "chars.txt")->encode("ba") == chars->encode("ba"));
}

TEST_CASE("seq_common: encoding never yields an empty sequence; translate_options' max_len") {
  const auto t = tools::fit_tokenizer("word", {"a b"}, 0);
  CHECK(tools::encode_line(*t, "   ") == std::vector<int64_t>{data::kUnk});
  const std::vector<data::Example> ex = {{"a", "b b"}, {" ", "a"}};
  const tools::Ids src = tools::encode_side(*t, ex, false), tgt = tools::encode_side(*t, ex, true);
  CHECK(src.size() == 2);
  CHECK(src[1] == std::vector<int64_t>{data::kUnk});
  CHECK(tgt[0].size() == 2);
  CHECK(tools::translate_options(tgt, 4, 0, 0.5).max_len == 2 * 2 + 10);
  CHECK(tools::translate_options(tgt, 4, 7, 0.5).max_len == 7);
  CHECK(tools::translate_options(tgt, 4, 7, 0.5).beam == 4);
}
