// BERT fine-tuning heads (models/bert_heads.h).
#include "models/bert_heads.h"

#include <fmt/format.h>

#include <map>

#include "nn/init.h"
#include "ops/error.h"

namespace graft::models {

BertClassifierBase::BertClassifierBase(const char* name, BertConfig c, int64_t k, bool with_pooler,
                                       double p)
    : config(c), num_labels(k), name_(name) {
  GRAFT_CHECK(k >= 1, "BERT classifier: num_labels must be >= 1, got {}", k);
  body = std::make_shared<BertForPreTraining>(c);
  bert = register_module("bert", std::make_shared<nn::Module>());
  for (const auto& [name, child] : body->named_children())
    if (name == "embeddings" || name == "encoder" || (with_pooler && name == "pooler"))
      bert->register_module(name, child);
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p < 0 ? c.dropout : p));
  classifier = register_module("classifier", std::make_shared<nn::Linear>(c.hidden_size, k));
  nn::init::normal_(classifier->weight, 0.0, 0.02);  // BERT's initializer_range, bias 0
  nn::init::zeros_(classifier->bias);
}

void BertClassifierBase::load_pretrained(const nn::StateDict& sd) {
  std::map<std::string, Tensor> by_name(sd.begin(), sd.end());
  nn::StateDict wanted;
  std::vector<std::string> missing;
  for (const auto& [name, t] : bert->state_dict()) {
    auto it = by_name.find(name);
    if (it == by_name.end()) it = by_name.find("bert." + name);
    if (it == by_name.end()) {
      missing.push_back(name);
      continue;
    }
    wanted.emplace_back(name, it->second);
  }
  GRAFT_CHECK(missing.empty(), "BERT load_pretrained: {} encoder weights missing (first: '{}'); "
              "hint: pass the state dict of a BertForPreTraining with the same config",
              missing.size(), missing.empty() ? "" : missing[0]);
  bert->load_state_dict(wanted, true);  // validates shapes and dtypes before copying
}

std::string BertClassifierBase::repr() const {
  return fmt::format("{}(hidden={}, layers={}, labels={})", name_, config.hidden_size,
                     config.num_layers, num_labels);
}

BertForSequenceClassification::BertForSequenceClassification(BertConfig c, int64_t k, double p)
    : BertClassifierBase("BertForSequenceClassification", c, k, true, p) {}

Tensor BertForSequenceClassification::forward(const Tensor& ids, const Tensor& types) {
  Tensor pooled = body->pool(body->encode(ids, types));  // [B, C]
  return classifier->forward(dropout->forward(pooled));  // [B, K]
}

Tensor BertForSequenceClassification::loss(const Tensor& logits, const Tensor& labels) const {
  GRAFT_CHECK(logits.defined() && labels.defined() && logits.dim() == 2 &&
                  logits.size(1) == num_labels && labels.dtype() == DType::i64 &&
                  labels.dim() == 1 && labels.size(0) == logits.size(0),
              "BertForSequenceClassification.loss: want logits [B, {}] and int64 labels [B], "
              "got {} and {}", num_labels, logits.defined() ? logits.shape() : Shape{},
              labels.defined() ? labels.shape() : Shape{});
  return cross_entropy(logits, labels);
}

BertForTokenClassification::BertForTokenClassification(BertConfig c, int64_t k, double p)
    : BertClassifierBase("BertForTokenClassification", c, k, false, p) {}

Tensor BertForTokenClassification::forward(const Tensor& ids, const Tensor& types) {
  Tensor h = body->encode(ids, types);               // [B, T, C]
  return classifier->forward(dropout->forward(h));  // [B, T, K]
}

Tensor BertForTokenClassification::loss(const Tensor& logits, const Tensor& labels) const {
  GRAFT_CHECK(logits.defined() && labels.defined() && logits.dim() == 3 &&
                  logits.size(2) == num_labels && labels.dtype() == DType::i64 &&
                  labels.dim() == 2 && labels.size(0) == logits.size(0) &&
                  labels.size(1) == logits.size(1),
              "BertForTokenClassification.loss: want logits [B, T, {}] and int64 labels [B, T], "
              "got {} and {}", num_labels, logits.defined() ? logits.shape() : Shape{},
              labels.defined() ? labels.shape() : Shape{});
  const int64_t K = num_labels;
  return cross_entropy(logits.reshape({-1, K}), labels.reshape({-1}));  // ignore_index -100
}

}  // namespace graft::models
