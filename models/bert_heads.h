// BERT fine-tuning heads (Devlin et al. 2019, section 4), Hugging Face names:
//
//   BertForSequenceClassification: pooled [CLS] (tanh(dense(h[:, 0]))) -> dropout -> Linear(C, K);
//     one sentence ([CLS] A [SEP], token types 0) or a pair ([CLS] A [SEP] B [SEP], types 0/1).
//   BertForTokenClassification: every position's hidden state -> dropout -> Linear(C, K)
//     (no pooler, as HF's add_pooling_layer=False).
//
//   models::BertForSequenceClassification m(models::BertConfig::named("tiny", V), /*labels=*/45);
//   m.load_pretrained(nn::load_safetensors("run/model.safetensors").tensors);  // encoder weights
//   Tensor logits = m.forward(input_ids, token_type_ids);   // [B, T] x2 -> [B, K]
//   Tensor loss = m.loss(logits, labels);                   // labels int64 [B]
//
// Parameters: bert.embeddings.*, bert.encoder.layers.<i>.*, bert.pooler.dense.* (sequence
// classification only), classifier.{weight,bias}. The encoder is a BertForPreTraining whose
// embeddings/encoder/pooler submodules are registered under "bert"; its MLM and NSP heads
// (cls.*) are not part of these modules (not trained, not saved).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "models/bert.h"
#include "nn/module.h"

namespace graft::models {

// Shared body of the heads: the BERT encoder under "bert", a dropout and a classifier.
class BertClassifierBase : public nn::Module {
 public:
  // Copies the encoder's weights from a state dict of BertForPreTraining (names "embeddings.*",
  // "encoder.*", "pooler.*") or of a model that holds it under "bert." (a fine-tuned head, Hugging
  // Face's names). Other keys (cls.*, classifier.*) are ignored. graft::Error, changing
  // nothing, when a needed key is missing or a shape or dtype differs (the message names it).
  void load_pretrained(const nn::StateDict& state_dict);
  // "<head name>(hidden=..., layers=..., labels=...)"
  std::string repr() const override;

  const BertConfig config;
  const int64_t num_labels;
  std::shared_ptr<BertForPreTraining> body;  // its cls.* heads unused
  std::shared_ptr<nn::Module> bert;          // embeddings, encoder (and pooler)
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;

 protected:
  BertClassifierBase(const char* name, BertConfig config, int64_t num_labels, bool with_pooler,
                     double classifier_dropout);

 private:
  const char* name_;  // the head's class name, for repr
};

class BertForSequenceClassification : public BertClassifierBase {
 public:
  // classifier_dropout < 0: config.dropout (HF's default). graft::Error for num_labels < 1.
  BertForSequenceClassification(BertConfig config, int64_t num_labels, double classifier_dropout = -1);
  using nn::Module::forward;
  // input_ids, token_type_ids int64 [B, T] -> logits [B, K]
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids);
  // logits [B, K], labels int64 [B] in [0, K) -> mean cross-entropy
  Tensor loss(const Tensor& logits, const Tensor& labels) const;
};

class BertForTokenClassification : public BertClassifierBase {
 public:
  BertForTokenClassification(BertConfig config, int64_t num_labels, double classifier_dropout = -1);
  using nn::Module::forward;
  // input_ids, token_type_ids int64 [B, T] -> logits [B, T, K]
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids);
  // logits [B, T, K], labels int64 [B, T] (-100 = ignored, e.g. [PAD] or word continuations)
  // -> mean cross-entropy over the labelled positions
  Tensor loss(const Tensor& logits, const Tensor& labels) const;
};

}  // namespace graft::models
