// Subword tokenizer on SentencePiece (Debian's libsentencepiece, the library Marian uses):
// unigram or BPE pieces trained on the training texts. graft's Vocab holds the pieces after the
// four specials; the SentencePiece model (saved beside the vocabulary) does the splitting, and
// join() undoes it ("\xe2\x96\x81", U+2581, marks the start of a word).
//
//   auto tok = data::SentencePieceTokenizer::fit(texts, 8000, "unigram");
//   std::vector<std::string> pieces = tok->split("In the beginning");  // {"▁In", "▁the", ...}
//   tok->save_model("src_spm.model");  tok->vocab().save("src_vocab.txt");
//   auto again = data::SentencePieceTokenizer::load("src_spm.model", Vocab::load("src_vocab.txt"));
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace graft::data {

class SentencePieceTokenizer : public Tokenizer {
 public:
  ~SentencePieceTokenizer() override;
  std::vector<std::string> split(const std::string& text) const override;
  std::string join(const std::vector<std::string>& tokens) const override;
  std::string kind() const override { return "sentencepiece"; }

  // Trains a model of at most vocab_size pieces (the four specials included) on texts;
  // model_type "unigram" or "bpe". graft::Error for a bad size or type, no text, or a training
  // failure (SentencePiece's message).
  static std::unique_ptr<SentencePieceTokenizer> fit(const std::vector<std::string>& texts,
                                                     int64_t vocab_size,
                                                     const std::string& model_type = "unigram");
  // A model file as save_model wrote it, with the vocabulary saved next to it; graft::Error for
  // an unreadable or corrupt model, or a vocabulary that does not hold the model's pieces.
  static std::unique_ptr<SentencePieceTokenizer> load(const std::string& model_path, Vocab vocab);
  void save_model(const std::string& path) const;  // atomic (ops/file_io.h)

 private:
  SentencePieceTokenizer(std::string proto, Vocab vocab);
  std::string proto_;  // the serialized model
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace graft::data
