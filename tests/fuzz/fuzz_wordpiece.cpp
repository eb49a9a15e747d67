// libFuzzer target for the tokenizers' user inputs: a BERT vocab.txt (WordPieceTokenizer::load)
// with WordPiece tokenization of arbitrary text, and the seq2seq vocabulary files (Vocab::load)
// with the char and word tokenizers. Any input must either work or raise graft::Error; a
// crash, a sanitizer report, a hang, any other exception (std::out_of_range, std::bad_alloc,
// graft::InternalError) or a broken property below is a bug.
//
// Input layout: byte 0 holds options (bit 0 lower_case, bits 1-2 strip_accents unset / false /
// true, bit 3 split_cjk, bit 4 nfc, bits 5-7 all set: also train a vocabulary on the text), then
// the vocabulary file's bytes up to the first NUL, then the text; the last byte also picks
// lengths and flags. Without a NUL the same bytes serve as vocabulary and text.
//
// Properties checked beyond "no crash":
//   * a loaded vocabulary saves and loads back to the same tokens (both file formats);
//   * every id from encode() lies in [0, size), encode_pair respects max_len;
//   * decode_utf8 . encode_utf8 . decode_utf8 == decode_utf8;
//   * a CharTokenizer fitted on a text decodes its encoding back to that text.
//
//   build/tests/fuzz/fuzz_wordpiece -dict=tests/fuzz/wordpiece.dict -max_total_time=60 \
//       /tmp/corpus tests/fuzz/corpus/wordpiece
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "data/wordpiece.h"
#include "ops/error.h"
#include "tests/fuzz/fuzz_util.h"

using namespace graft;

namespace {

// Used when the fuzzed vocab.txt is rejected, so that tokenization is fuzzed on every input.
const data::WordPieceTokenizer& fallback_tokenizer(const data::BasicTokenizerOptions& o) {
  static const std::vector<std::string> tokens = {
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "the", "un", "##able",
      "##s", "##a", "##b", "é", "##é", "中", ",", ".", "!", "hello", "world", "##ing"};
  // One tokenizer per options byte value that reaches here (few distinct ones).
  static std::vector<std::unique_ptr<data::WordPieceTokenizer>> cache(64);
  const size_t key = (o.lower_case ? 1 : 0) | (o.strip_accents ? (*o.strip_accents ? 4 : 2) : 0) |
                     (o.split_cjk ? 8 : 0) | (o.nfc ? 16 : 0);
  if (!cache[key]) cache[key] = std::make_unique<data::WordPieceTokenizer>(tokens, o);
  return *cache[key];
}

void check_ids(const std::vector<int64_t>& ids, int64_t size) {
  for (int64_t id : ids) GRAFT_FUZZ_EXPECT(id >= 0 && id < size);
}

void fuzz_wordpiece(const data::WordPieceTokenizer& tok, std::string_view text, uint8_t sel) {
  const std::vector<std::string> pieces = tok.tokenize(text);
  const std::vector<int64_t> ids = tok.encode(text, sel & 1);
  check_ids(ids, tok.size());
  if (!(sel & 1)) GRAFT_FUZZ_EXPECT(ids.size() == pieces.size());
  (void)tok.decode(ids, true);
  (void)tok.decode(ids, false);
  // [CLS] A [SEP] B [SEP] with the text cut in two (the cut may split a UTF-8 sequence).
  const size_t half = text.size() / 2;
  const int64_t max_len = int64_t(sel >> 1) - 8;  // -8 .. 119: below 3 must raise graft::Error
  try {
    const data::PairEncoding e = tok.encode_pair(text.substr(0, half), text.substr(half), max_len);
    GRAFT_FUZZ_EXPECT(max_len >= 3);
    GRAFT_FUZZ_EXPECT(int64_t(e.input_ids.size()) <= max_len);
    GRAFT_FUZZ_EXPECT(e.input_ids.size() == e.token_type_ids.size() && e.input_ids.size() >= 3);
    GRAFT_FUZZ_EXPECT(e.input_ids.front() == tok.cls_id() && e.input_ids.back() == tok.sep_id());
    check_ids(e.input_ids, tok.size());
    for (int64_t t : e.token_type_ids) GRAFT_FUZZ_EXPECT(t == 0 || t == 1);
  } catch (const Error&) {
    GRAFT_FUZZ_EXPECT(max_len < 3);
  }
  // An id outside the vocabulary is a graft::Error.
  try {
    (void)tok.id_to_token(tok.size() + int64_t(sel));
    GRAFT_FUZZ_EXPECT(false);
  } catch (const Error&) {
  }
}

void fuzz_unicode(std::string_view text) {
  namespace u = data::unicode;
  const std::u32string cps = u::decode_utf8(text);
  const std::string utf8 = u::encode_utf8(cps);
  GRAFT_FUZZ_EXPECT(u::decode_utf8(utf8) == cps);
  (void)u::nfc(cps);
  (void)u::nfd(cps);
}

// Vocab (one token per line, backslash escapes) and the seq2seq tokenizers.
void fuzz_vocab(const std::string& path, std::string_view text, uint8_t sel) {
  const std::string t(text);
  try {
    const data::Vocab v = data::Vocab::load(path);
    v.save(fuzz::scratch_dir() + "/vocab-copy.txt");
    const data::Vocab back = data::Vocab::load(fuzz::scratch_dir() + "/vocab-copy.txt");
    GRAFT_FUZZ_EXPECT(back.size() == v.size());
    for (int64_t i = 0; i < v.size(); ++i) GRAFT_FUZZ_EXPECT(back.token(i) == v.token(i));
    data::CharTokenizer ct(v);
    const auto cids = ct.encode(t, sel & 1, sel & 2);
    check_ids(cids, v.size());
    (void)ct.decode(cids, sel & 4);
    data::WordTokenizer wt(v, sel & 8, sel & 16);
    const auto wids = wt.encode(t, sel & 1, sel & 2);
    check_ids(wids, v.size());
    (void)wt.decode(wids, sel & 4);
  } catch (const Error&) {
  }
  // Vocabularies fitted on the text itself.
  const data::CharTokenizer ct = data::CharTokenizer::fit({t});
  GRAFT_FUZZ_EXPECT(ct.decode(ct.encode(t)) == t);
  const data::WordTokenizer wt = data::WordTokenizer::fit({t}, sel & 8, sel & 16);
  const auto ids = wt.encode(t, true, true);
  check_ids(ids, wt.vocab().size());
  (void)wt.decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t opt = data[0];
  data::BasicTokenizerOptions o;
  o.lower_case = opt & 1;
  if ((opt >> 1 & 3) == 1) o.strip_accents = false;
  if ((opt >> 1 & 3) >= 2) o.strip_accents = true;
  o.split_cjk = opt & 8;
  o.nfc = opt & 16;
  const uint8_t sel = size > 1 ? data[size - 1] : 0;  // lengths and flags below
  const auto [vocab_text, text] =
      fuzz::split_at_nul(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  const std::string path = fuzz::write_scratch("vocab.txt", vocab_text);
  std::optional<data::WordPieceTokenizer> tok;
  try {
    tok.emplace(data::WordPieceTokenizer::load(path, o));
  } catch (const Error&) {
  }
  if (tok) {
    tok->save(fuzz::scratch_dir() + "/wordpiece-copy.txt");
    const auto back = data::WordPieceTokenizer::load(fuzz::scratch_dir() + "/wordpiece-copy.txt", o);
    GRAFT_FUZZ_EXPECT(back.tokens() == tok->tokens());
  }
  fuzz_wordpiece(tok ? *tok : fallback_tokenizer(o), text, sel);
  fuzz_unicode(text);
  fuzz_vocab(path, text, sel);
  // Training a WordPiece vocabulary on the text's lines (for one options value in eight: it is
  // the slow part; small sizes keep it fast).
  if ((opt >> 5) == 7) {
    std::vector<std::string> lines;
    std::string cur;
    for (char c : text) {
      if (c == '\n') lines.push_back(std::move(cur)), cur.clear();
      else cur += c;
    }
    lines.push_back(cur);
    try {
      const auto trained = data::WordPieceTokenizer::train(lines, 5 + (sel & 63), o, 1 + (sel >> 6));
      check_ids(trained.encode(text, true), trained.size());
    } catch (const Error&) {
    }
  }
  return 0;
}
