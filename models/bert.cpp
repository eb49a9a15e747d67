// BERT for pretraining (models/bert.h): embeddings, post-norm encoder, pooler, MLM and NSP heads.
#include "models/bert.h"

#include <fmt/format.h>

#include "models/options_json.h"
#include "nn/init.h"
#include "ops/error.h"

namespace graft::models {

BertConfig BertConfig::named(const std::string& name, int64_t vocab_size) {
  struct Size { const char* name; int64_t layers, hidden; };
  static const Size sizes[] = {{"tiny", 2, 128},  {"mini", 4, 256},  {"small", 4, 512},
                               {"medium", 8, 512}, {"base", 12, 768}, {"large", 24, 1024}};
  for (const Size& s : sizes) {
    if (name != s.name) continue;
    BertConfig c;
    c.vocab_size = vocab_size;
    c.num_layers = s.layers;
    c.hidden_size = s.hidden;
    c.num_heads = s.hidden / 64;
    c.intermediate_size = 4 * s.hidden;
    return c;
  }
  GRAFT_CHECK(false, "BertConfig.named: unknown config '{}'; hint: tiny, mini, small, medium, "
              "base or large", name);
  return {};
}

void check_bert_config(const BertConfig& c, const std::string& what) {
  struct Field { const char* name; int64_t value, lo, hi; };
  // Far above any published BERT (large: 24 x 1024, vocabularies up to ~250k), far below
  // what would hang or exhaust memory while the model is built.
  const Field fields[] = {{"vocab_size", c.vocab_size, 1, int64_t(1) << 24},
                          {"hidden_size", c.hidden_size, 1, 65536},
                          {"num_layers", c.num_layers, 1, 256},
                          {"num_heads", c.num_heads, 1, 1024},
                          {"intermediate_size", c.intermediate_size, 1, 1 << 20},
                          {"max_position_embeddings", c.max_position_embeddings, 1, 1 << 20},
                          {"type_vocab_size", c.type_vocab_size, 1, 1024}};
  for (const Field& f : fields)
    GRAFT_CHECK(f.value >= f.lo && f.value <= f.hi, "{}: {} = {} is outside the allowed range [{}, "
                "{}]", what, f.name, f.value, f.lo, f.hi);
  GRAFT_CHECK(c.hidden_size % c.num_heads == 0, "{}: hidden_size {} is not divisible by num_heads "
              "{}", what, c.hidden_size, c.num_heads);
}

BertForPreTraining::BertForPreTraining(BertConfig c) : config(c) {
  check_bert_config(c, "BertForPreTraining");
  {  // weights: 4 C^2 + 2 C F per layer, word and position tables
    const double C = double(c.hidden_size), F = double(c.intermediate_size);
    check_model_fits("BertForPreTraining", double(c.num_layers) * (4 * C * C + 2 * C * F) +
                                               double(c.vocab_size + c.max_position_embeddings) * C);
  }
  const int64_t C = c.hidden_size;
  auto emb = register_module("embeddings", std::make_shared<nn::Module>());
  word_embeddings = emb->register_module("word_embeddings", std::make_shared<nn::Embedding>(c.vocab_size, C));
  position_embeddings = emb->register_module("position_embeddings", std::make_shared<nn::Embedding>(c.max_position_embeddings, C));
  token_type_embeddings = emb->register_module("token_type_embeddings", std::make_shared<nn::Embedding>(c.type_vocab_size, C));
  for (auto* e : {&word_embeddings, &position_embeddings, &token_type_embeddings})
    nn::init::normal_((*e)->weight, 0.0, 0.02);  // BERT's initializer_range
  emb_norm = emb->register_module("LayerNorm", std::make_shared<nn::LayerNorm>(C, c.layer_norm_eps));
  emb_dropout = emb->register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
  nn::TransformerLayerOptions lo;
  lo.d_model = C;
  lo.nhead = c.num_heads;
  lo.dim_feedforward = c.intermediate_size;
  lo.dropout = c.dropout;
  lo.activation = "gelu";
  lo.layer_norm_eps = c.layer_norm_eps;
  lo.norm_first = false;  // post-norm, as BERT
  encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(lo, c.num_layers, false));
  auto pool = register_module("pooler", std::make_shared<nn::Module>());
  pooler = pool->register_module("dense", std::make_shared<nn::Linear>(C, C));
  auto cls = register_module("cls", std::make_shared<nn::Module>());
  auto pred = cls->register_module("predictions", std::make_shared<nn::Module>());
  auto transform = pred->register_module("transform", std::make_shared<nn::Module>());
  mlm_dense = transform->register_module("dense", std::make_shared<nn::Linear>(C, C));
  mlm_norm = transform->register_module("LayerNorm", std::make_shared<nn::LayerNorm>(C, c.layer_norm_eps));
  mlm_bias = pred->register_parameter("bias", zeros({c.vocab_size}));
  seq_relationship = cls->register_module("seq_relationship", std::make_shared<nn::Linear>(C, 2));
}

std::string BertForPreTraining::repr() const {
  return fmt::format("BertForPreTraining(vocab={}, hidden={}, layers={}, heads={}, ffn={})",
                     config.vocab_size, config.hidden_size, config.num_layers, config.num_heads,
                     config.intermediate_size);
}

Tensor BertForPreTraining::encode(const Tensor& ids, const Tensor& types) {
  GRAFT_CHECK(ids.defined() && types.defined() && ids.dtype() == DType::i64 &&
                  types.dtype() == DType::i64 && ids.dim() == 2 && types.shape() == ids.shape(),
              "BertForPreTraining.encode: input_ids and token_type_ids must be int64 [B, T] of "
              "the same shape, got {} and {}", ids.defined() ? ids.shape() : Shape{},
              types.defined() ? types.shape() : Shape{});
  const int64_t B = ids.size(0), T = ids.size(1);
  GRAFT_CHECK(T >= 1 && T <= config.max_position_embeddings, "BertForPreTraining.encode: "
              "length {} outside [1, {}]; hint: truncate to max_position_embeddings", T,
              config.max_position_embeddings);
  Tensor pos = arange(0, double(T), 1, TensorOptions(DType::i64).device(ids.device())).reshape({1, T});
  Tensor x = add(add(word_embeddings->forward(ids), position_embeddings->forward(pos)),
                 token_type_embeddings->forward(types));  // [B, T, C]
  x = emb_dropout->forward(emb_norm->forward(x));
  nn::EncoderForward f;
  f.key_padding_mask = eq(ids, full({B, T}, double(config.pad_token_id), TensorOptions(DType::i64).device(ids.device())));  // [B, T]
  return encoder->forward(x, f);
}

Tensor BertForPreTraining::pool(const Tensor& hidden) {
  return tanh(pooler->forward(hidden.select(1, 0)));  // [B, C]
}

BertPretrainingOutput BertForPreTraining::loss(const Tensor& ids, const Tensor& types,
                                               const Tensor& labels, const Tensor& nsp) {
  GRAFT_CHECK(labels.defined() && labels.dtype() == DType::i64 && labels.shape() == ids.shape(),
              "BertForPreTraining.loss: labels must be int64 {} like input_ids, got {}",
              ids.shape(), labels.defined() ? labels.shape() : Shape{});
  GRAFT_CHECK(nsp.defined() && nsp.dtype() == DType::i64 && nsp.dim() == 1 &&
                  nsp.size(0) == ids.size(0),
              "BertForPreTraining.loss: next_sentence_label must be int64 [B={}], got {}",
              ids.size(0), nsp.defined() ? nsp.shape() : Shape{});
  Tensor h = encode(ids, types);  // [B, T, C]
  const int64_t C = config.hidden_size;
  // The MLM head only at the N positions with a label: rows of h flattened to [B*T, C].
  std::vector<int64_t> lab = labels.contiguous().to_vector<int64_t>(), rows, targets;
  for (size_t k = 0; k < lab.size(); ++k)
    if (lab[k] != -100) { rows.push_back(int64_t(k)); targets.push_back(lab[k]); }
  GRAFT_CHECK(!rows.empty(), "BertForPreTraining.loss: no position has a label; hint: mask at "
              "least one token per batch (labels != -100)");
  const int64_t N = int64_t(rows.size());
  Tensor hm = index_select(h.reshape({-1, C}), 0, from_vector(rows, {N}).to(h.device()));  // [N, C]
  hm = mlm_norm->forward(gelu(mlm_dense->forward(hm)));
  BertPretrainingOutput out;
  out.mlm_logits = linear(hm, word_embeddings->weight, mlm_bias);  // tied decoder: [N, V]
  out.nsp_logits = seq_relationship->forward(pool(h));              // [B, 2]
  out.mlm_loss = cross_entropy(out.mlm_logits, from_vector(targets, {N}).to(h.device()));
  out.nsp_loss = cross_entropy(out.nsp_logits, nsp);
  out.loss = add(out.mlm_loss, out.nsp_loss);
  return out;
}

}  // namespace graft::models
