// BERT (Devlin et al. 2019) for pretraining: token + position + segment embeddings with
// LayerNorm and dropout, a post-norm GELU nn::TransformerEncoder, a tanh pooler on [CLS], an MLM
// head (dense + GELU + LayerNorm, decoder tied to the word embeddings, own bias) evaluated only
// at the masked positions, and an NSP head.
//
//   models::BertForPreTraining m(models::BertConfig::named("tiny", 30522));
//   auto out = m.loss(input_ids, token_type_ids, labels, nsp_labels);  // [B, T] x3, [B]
//   out.loss.backward();
//
// Module names follow Hugging Face where the blocks allow: embeddings.word_embeddings,
// embeddings.position_embeddings, embeddings.token_type_embeddings, embeddings.LayerNorm,
// encoder.layers.<i>.* (graft's TransformerEncoderLayer names), pooler.dense,
// cls.predictions.transform.dense, cls.predictions.transform.LayerNorm, cls.predictions.bias,
// cls.seq_relationship.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/transformer.h"

namespace graft::models {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 128;
  int64_t num_layers = 2;
  int64_t num_heads = 2;
  int64_t intermediate_size = 512;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double dropout = 0.1;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  // tiny (2, 128), mini (4, 256), small (4, 512), medium (8, 512), base (12, 768),
  // large (24, 1024); heads = hidden / 64, FFN = 4 hidden. graft::Error for another name.
  static BertConfig named(const std::string& name, int64_t vocab_size = 30522);
};

// graft::Error "<what>: num_layers = 100000 is outside the allowed range [1, 256]" for a size
// outside what graft builds, or hidden_size not divisible by num_heads. The constructor runs
// it, so a config read from a run's metadata or a config.json cannot hang or exhaust memory.
void check_bert_config(const BertConfig& c, const std::string& what);

struct BertPretrainingOutput {
  Tensor loss, mlm_loss, nsp_loss;  // scalars; loss = mlm_loss + nsp_loss
  Tensor mlm_logits;  // [N, V] at the N positions whose label != -100
  Tensor nsp_logits;  // [B, 2]
};

class BertForPreTraining : public nn::Module {
 public:
  explicit BertForPreTraining(BertConfig config);  // graft::Error for bad sizes
  std::string repr() const override;
  // ids, token types int64 [B, T] -> hidden states [B, T, C]; [PAD] positions are masked out
  // of attention.
  Tensor encode(const Tensor& input_ids, const Tensor& token_type_ids);
  Tensor pool(const Tensor& hidden);  // [B, T, C] -> tanh(dense(hidden[:, 0])) [B, C]
  // labels int64 [B, T] (-100 = not predicted), next_sentence_label int64 [B] (0 = is next).
  BertPretrainingOutput loss(const Tensor& input_ids, const Tensor& token_type_ids,
                             const Tensor& labels, const Tensor& next_sentence_label);

  const BertConfig config;
  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> emb_norm, mlm_norm;
  std::shared_ptr<nn::Dropout> emb_dropout;
  std::shared_ptr<nn::TransformerEncoder> encoder;
  std::shared_ptr<nn::Linear> pooler, mlm_dense, seq_relationship;
  Tensor mlm_bias;  // [V]
};

}  // namespace graft::models
