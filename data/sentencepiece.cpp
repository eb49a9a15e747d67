#include "data/sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::data {
namespace {

// Hands the training texts to SentencePiece one by one (no temporary file).
class TextIterator : public sentencepiece::SentenceIterator {
 public:
  explicit TextIterator(const std::vector<std::string>& texts) : texts_(texts) {}
  bool done() const override { return i_ >= texts_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return texts_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& texts_;
  size_t i_ = 0;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::string proto, Vocab vocab)
    : proto_(std::move(proto)), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto st = sp_->LoadFromSerializedProto(proto_);
  GRAFT_CHECK(st.ok(), "sentencepiece: cannot load the model: {}", st.ToString());
  vocab_ = std::move(vocab);
  // Every piece but SentencePiece's own <unk> (id 0) must be in graft's vocabulary.
  for (int i = 1; i < sp_->GetPieceSize(); ++i)
    GRAFT_CHECK(vocab_.contains(sp_->IdToPiece(i)),
                "sentencepiece: the vocabulary has no entry for the model's piece {} ('{}'): "
                "the vocabulary file and the model do not belong together", i, sp_->IdToPiece(i));
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::fit(const std::vector<std::string>& texts,
                                                                    int64_t vocab_size,
                                                                    const std::string& model_type) {
  GRAFT_CHECK(model_type == "unigram" || model_type == "bpe",
              "sentencepiece: model type must be unigram or bpe, got '{}'", model_type);
  GRAFT_CHECK(vocab_size >= 8 && vocab_size <= (int64_t(1) << 20),
              "sentencepiece: vocabulary size must be in [8, 2^20], got {}", vocab_size);
  GRAFT_CHECK(!texts.empty(), "sentencepiece: no training text");
  // SentencePiece keeps only <unk> (id 0) of its own specials; graft adds <pad> <bos> <eos>.
  // hard_vocab_limit false: a small corpus gives fewer pieces instead of failing.
  const std::unordered_map<std::string, std::string> args = {
      {"vocab_size", std::to_string(vocab_size - 3)}, {"model_type", model_type},
      {"character_coverage", "1.0"}, {"hard_vocab_limit", "false"},
      {"bos_id", "-1"}, {"eos_id", "-1"}, {"pad_id", "-1"}, {"unk_id", "0"},
      {"input_sentence_size", "2000000"}, {"shuffle_input_sentence", "true"},
      {"minloglevel", "2"}};
  TextIterator it(texts);
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
  GRAFT_CHECK(st.ok(), "sentencepiece: training failed: {}", st.ToString());
  sentencepiece::SentencePieceProcessor sp;
  GRAFT_CHECK(sp.LoadFromSerializedProto(proto).ok(), "sentencepiece: the trained model does not load");
  Vocab v;
  for (int i = 1; i < sp.GetPieceSize(); ++i) v.add(sp.IdToPiece(i));
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(proto), std::move(v)));
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(const std::string& model_path, Vocab vocab) {
  std::string proto = read_file(model_path, "sentencepiece model");
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(proto), std::move(vocab)));
}

void SentencePieceTokenizer::save_model(const std::string& path) const {
  atomic_write(path, proto_, "sentencepiece model");
}

std::vector<std::string> SentencePieceTokenizer::split(const std::string& text) const {
  std::vector<std::string> pieces;
  const auto st = sp_->Encode(text, &pieces);
  GRAFT_CHECK(st.ok(), "sentencepiece: cannot encode: {}", st.ToString());
  return pieces;
}

std::string SentencePieceTokenizer::join(const std::vector<std::string>& tokens) const {
  std::string out;
  const auto st = sp_->Decode(tokens, &out);
  GRAFT_CHECK(st.ok(), "sentencepiece: cannot decode: {}", st.ToString());
  return out;
}

}  // namespace graft::data
