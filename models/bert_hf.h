// Hugging Face BERT checkpoints <-> graft's models::BertForPreTraining.
//
// A checkpoint directory as transformers' save_pretrained writes it:
//   config.json        BertConfig fields (hidden_size, num_hidden_layers, ...)
//   model.safetensors  tensors named bert.embeddings.*, bert.encoder.layer.<i>.*,
//                      bert.pooler.dense.*, cls.predictions.*, cls.seq_relationship.*, in F32,
//                      F64, BF16 or F16 (nn/safetensors.h converts the halves to float32); or
//                      model.safetensors.index.json and the shards it names
//   vocab.txt          BertTokenizer's vocabulary (data::WordPieceTokenizer reads it)
// Only safetensors is read: pytorch_model.bin (a Python pickle) is refused with a hint.
//
//   auto m = models::load_hf_bert("ckpt/");          // new model, config from config.json
//   models::load_hf_bert_into(*m, "ckpt/");          // same sizes: validates, then copies
//   models::save_hf_bert(*m, "out/");                // config.json + model.safetensors
//   auto o = models::bert_forward_hf(*m, ids, types);  // all-position outputs, as HF returns
//
// Name mapping (HF -> graft), per layer i, C = hidden size:
//   bert.embeddings.X                              -> embeddings.X
//   attention.self.{query,key,value}.{weight,bias} -> self_attn.in_proj_{weight,bias} rows
//                                                     [0, C), [C, 2C), [2C, 3C) (packed)
//   attention.output.dense / .LayerNorm            -> self_attn.out_proj / norm1
//   intermediate.dense / output.dense / output.LayerNorm -> linear1 / linear2 / norm2
//   bert.pooler.dense                              -> pooler.dense
//   cls.*                                          -> cls.* (same names)
// cls.predictions.decoder.weight is tied to the word embeddings (HF does not store it; if a file
// has it, it must equal them) and cls.predictions.decoder.bias is cls.predictions.bias. Older
// checkpoints' LayerNorm.gamma / LayerNorm.beta are read as weight / bias, and a missing "bert."
// prefix is accepted. Loading validates the config, every name, shape and dtype before the
// model is touched: on any graft::Error the model is unchanged.
#pragma once
#include <memory>
#include <string>

#include "models/bert.h"
#include "nn/module.h"

namespace graft::models {

// config.json text -> BertConfig; graft::Error (naming `what` and the field) for malformed JSON,
// missing sizes, or what graft's BERT cannot express: hidden_act other than "gelu" (exact erf),
// position_embedding_type other than "absolute", is_decoder / add_cross_attention,
// tie_word_embeddings false, different hidden and attention dropouts, model_type not "bert".
BertConfig bert_config_from_hf_json(const std::string& json_text, const std::string& what);
// BertConfig -> config.json text that transformers.BertForPreTraining.from_pretrained accepts.
std::string bert_config_to_hf_json(const BertConfig& c);

// HF-named tensors -> graft's state dict for a model of config `c` (validated: every expected
// tensor present with its shape, no unknown names, floating dtypes; converted to `dtype`).
nn::StateDict bert_state_dict_from_hf(const nn::NamedTensors& hf, const BertConfig& c,
                                      DType dtype, const std::string& what);
// The model's tensors under HF's names, float32, as save_pretrained stores them.
nn::NamedTensors bert_state_dict_to_hf(const BertForPreTraining& m);

// Reads dir/config.json and dir/model.safetensors (or the sharded index) into a new model.
std::unique_ptr<BertForPreTraining> load_hf_bert(const std::string& dir);
// Loads dir into `m`; its config.json must describe m's sizes. m is unchanged on error.
void load_hf_bert_into(BertForPreTraining& m, const std::string& dir);
// Writes dir/config.json and dir/model.safetensors (atomically each; creates dir). Copy
// vocab.txt yourself (the model does not hold a vocabulary).
void save_hf_bert(const BertForPreTraining& m, const std::string& dir);

// The outputs transformers.BertForPreTraining returns, at every position.
struct BertHfOutput {
  Tensor last_hidden_state;  // [B, T, C]
  Tensor mlm_logits;         // [B, T, V] (HF's prediction_logits)
  Tensor nsp_logits;         // [B, 2] (HF's seq_relationship_logits)
};
// ids, token types int64 [B, T]; the attention mask is ids != pad_token_id (graft's rule).
BertHfOutput bert_forward_hf(BertForPreTraining& m, const Tensor& input_ids,
                             const Tensor& token_type_ids);

}  // namespace graft::models
