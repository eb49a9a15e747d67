// The encoder-decoder Transformer (models/transformer.h): embeddings, stacks, tied output,
// label-smoothed loss, and a KV-cached incremental decoder for greedy and beam search.
#include "models/transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "autograd/compile.h"
#include "autograd/grad_mode.h"
#include "data/tokenizer.h"
#include "models/options_json.h"
#include "nn/init.h"
#include "ops/error.h"

namespace graft::models {

// ------------------------------------------------------------------ options <-> JSON

namespace {
// The JSON keys and, for reading back, the ranges of graft train transformer's flags
// (vocabularies and max_len come from the data).
const std::vector<OptionField<TransformerOptions>>& option_fields() {
  using O = TransformerOptions;
  static const std::vector<OptionField<O>> f = {
      {"src_vocab", &O::src_vocab, 4, kMaxJsonVocab},
      {"tgt_vocab", &O::tgt_vocab, 4, kMaxJsonVocab},
      {"d_model", &O::d_model, 2, kMaxJsonWidth},
      {"nhead", &O::nhead, 1, 1024},
      {"num_encoder_layers", &O::num_encoder_layers, 1, 64},
      {"num_decoder_layers", &O::num_decoder_layers, 1, 64},
      {"dim_feedforward", &O::dim_feedforward, 1, kMaxJsonFeedForward},
      {"dropout", &O::dropout, 0.0, 0.95},
      {"activation", &O::activation},
      {"norm_first", &O::norm_first},
      {"share_embeddings", &O::share_embeddings},
      {"tie_output", &O::tie_output},
      {"learned_positions", &O::learned_positions},
      {"max_len", &O::max_len, 2, kMaxJsonPositions},
      {"init", &O::init},
  };
  return f;
}
}  // namespace

std::string TransformerOptions::to_json() const { return options_to_json(*this, option_fields()); }

TransformerOptions TransformerOptions::from_json(const std::string& text) {
  return options_from_json(text, "TransformerOptions", option_fields());
}

// ------------------------------------------------------------------ model

namespace {
nn::TransformerLayerOptions layer_options(const TransformerOptions& o) {
  nn::TransformerLayerOptions l;
  l.d_model = o.d_model;
  l.nhead = o.nhead;
  l.dim_feedforward = o.dim_feedforward;
  l.dropout = o.dropout;
  l.activation = o.activation;
  l.norm_first = o.norm_first;
  return l;
}
void check_ids(const Tensor& ids, const char* what) {
  check_defined(ids, "Transformer");
  GRAFT_CHECK(ids.dtype() == DType::i64 && ids.dim() == 2,
              "Transformer: {} must be int64 token ids [B, L], got {} {}", what, ids.dtype(),
              ids.shape());
}  // (Embedding checks the id range and names a bad id)
}  // namespace

Transformer::Transformer(TransformerOptions o) : options(std::move(o)) {
  const TransformerOptions& op = options;
  GRAFT_CHECK(op.src_vocab > data::kUnk && op.tgt_vocab > data::kUnk,
              "Transformer: src_vocab and tgt_vocab must include the 4 specials, got {} and {}",
              op.src_vocab, op.tgt_vocab);
  GRAFT_CHECK(op.num_encoder_layers > 0 && op.num_decoder_layers > 0,
              "Transformer: layer counts must be positive, got {} and {}", op.num_encoder_layers,
              op.num_decoder_layers);
  GRAFT_CHECK(!op.share_embeddings || op.src_vocab == op.tgt_vocab,
              "Transformer: share_embeddings needs src_vocab == tgt_vocab (a joint vocabulary), "
              "got {} and {}",
              op.src_vocab, op.tgt_vocab);
  GRAFT_CHECK(op.max_len > 0, "Transformer: max_len must be positive, got {}", op.max_len);
  GRAFT_CHECK(op.init == "layers" || op.init == "xavier",
              "Transformer: init must be \"layers\" or \"xavier\", got \"{}\"", op.init);
  {  // weights: attention 4 C^2 per block (8 in a decoder layer), feed-forward 2 C F, tables V C
    const double C = double(op.d_model), F = double(op.dim_feedforward);
    const double vocab = double(op.src_vocab) + (op.share_embeddings ? 0.0 : double(op.tgt_vocab)) +
                         (op.tie_output ? 0.0 : double(op.tgt_vocab));
    check_model_fits("Transformer", double(op.num_encoder_layers) * (4 * C * C + 2 * C * F) +
                                        double(op.num_decoder_layers) * (8 * C * C + 2 * C * F) +
                                        (vocab + double(op.max_len)) * C);
  }
  const double std = 1.0 / std::sqrt(double(op.d_model));
  src_embed = register_module("src_embed", std::make_shared<nn::Embedding>(op.src_vocab, op.d_model, data::kPad));
  nn::init::normal_(src_embed->weight, 0.0, std);
  if (op.share_embeddings) {
    tgt_embed = src_embed;
  } else {
    tgt_embed = register_module("tgt_embed", std::make_shared<nn::Embedding>(op.tgt_vocab, op.d_model, data::kPad));
    nn::init::normal_(tgt_embed->weight, 0.0, std);
  }
  {
    NoGradGuard ng;  // the padding rows start at zero again
    src_embed->weight.select(0, data::kPad).zero_();
    tgt_embed->weight.select(0, data::kPad).zero_();
  }
  if (op.learned_positions)
    pos = register_module("pos", std::make_shared<nn::LearnedPositionalEmbedding>(op.max_len, op.d_model, op.dropout));
  else
    pos = register_module("pos", std::make_shared<nn::PositionalEncoding>(op.d_model, op.dropout, op.max_len));
  const nn::TransformerLayerOptions lo = layer_options(op);
  encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(lo, op.num_encoder_layers));
  decoder_stack = register_module("decoder", std::make_shared<nn::TransformerDecoder>(lo, op.num_decoder_layers));
  if (op.init == "xavier")  // every stack matrix; biases and LayerNorms keep the layers' values
    for (const auto& stack : {encoder->named_parameters(), decoder_stack->named_parameters()})
      for (const auto& [name, p] : stack)
        if (p.dim() > 1) nn::init::xavier_uniform_(p);
  if (!op.tie_output)
    generator = register_module("generator", std::make_shared<nn::Linear>(op.d_model, op.tgt_vocab, false));
}

std::string Transformer::repr() const {
  return fmt::format("Transformer(d_model={}, nhead={}, layers={}+{}, ffn={}, vocab={}/{})",
                     options.d_model, options.nhead, options.num_encoder_layers,
                     options.num_decoder_layers, options.dim_feedforward, options.src_vocab,
                     options.tgt_vocab);
}

Tensor Transformer::embed(const std::shared_ptr<nn::Embedding>& table, const Tensor& ids,
                          int64_t offset) {
  Tensor x = table->forward(ids) * std::sqrt(double(options.d_model));  // [B, L, C]
  if (auto* s = dynamic_cast<nn::PositionalEncoding*>(pos.get())) return s->forward(x, offset);
  return static_cast<nn::LearnedPositionalEmbedding*>(pos.get())->forward(x, offset);
}

Tensor Transformer::encode(const Tensor& src, const Tensor& src_key_padding_mask) {
  check_ids(src, "src");
  nn::EncoderForward f;
  f.key_padding_mask = src_key_padding_mask;
  return encoder->forward(embed(src_embed, src, 0), f);
}

Tensor Transformer::decode(const Tensor& tgt, const Tensor& memory,
                           const Tensor& memory_key_padding_mask, nn::DecoderCache* cache) {
  check_ids(tgt, "tgt");
  nn::DecoderForward f;
  f.memory_key_padding_mask = memory_key_padding_mask;
  f.tgt_is_causal = true;
  f.cache = cache;
  Tensor h = decoder_stack->forward(embed(tgt_embed, tgt, cache ? cache->length : 0), memory, f);
  return generator ? generator->forward(h) : linear(h, tgt_embed->weight);  // [B, T, V]
}

Tensor Transformer::forward_logits(const data::Seq2SeqBatch& b) {
  GRAFT_CHECK(b.tgt_in.defined(), "Transformer: the batch has no targets");
  Tensor memory = encode(b.src, b.src_key_padding_mask);
  return decode(b.tgt_in, memory, b.src_key_padding_mask);
}

TransformerLoss Transformer::loss(const data::Seq2SeqBatch& b, double label_smoothing) {
  Tensor logits = forward_logits(b);
  const int64_t V = logits.size(2);
  Tensor flat = logits.reshape({-1, V}), target = b.tgt_out.reshape({-1});
  CrossEntropyOptions ce;
  ce.ignore_index = data::kPad;
  ce.label_smoothing = label_smoothing;
  TransformerLoss r;
  r.tokens = b.target_tokens();
  if (label_smoothing == 0.0) {
    r.loss = cross_entropy(flat, target, ce);
    // not read inside a graft::compile trace (a replay would not repeat a host read)
    r.nll = trace::tracing() ? std::numeric_limits<double>::quiet_NaN() : r.loss.item<double>();
  } else {  // the smoothed loss to train on, the plain NLL to report, from one pass
    auto [loss, nll] = cross_entropy_with_nll(flat, target, ce);
    r.loss = loss, r.nll = nll;
  }
  return r;
}

// ------------------------------------------------------------------ incremental decoding

namespace {

class TransformerDecoder final : public IncrementalDecoder {
 public:
  // capacity: the positions each layer's self-attention cache preallocates (the longest decode)
  TransformerDecoder(Transformer& m, Tensor memory, Tensor pad, bool cached, int64_t capacity)
      : m_(m), memory_(std::move(memory)), pad_(std::move(pad)), cached_(cached) {
    cache_.layers.resize(m.decoder_stack->layers.size());
    for (nn::DecoderLayerCache& l : cache_.layers) l.self_attn.capacity = capacity;
  }

  Tensor step(const Tensor& prev) override {
    NoGradGuard ng;
    GRAFT_CHECK(prev.dim() == 1 && prev.size(0) == memory_.size(0),
                "Transformer decoder: expected {} previous tokens, got shape {}", memory_.size(0),
                prev.shape());
    Tensor logits;
    if (cached_) {
      logits = m_.decode(prev.unsqueeze(1), memory_, pad_, &cache_);  // [N, 1, V]
    } else {
      prefix_ = prefix_.defined() ? cat({prefix_, prev.unsqueeze(1)}, 1) : prev.unsqueeze(1);
      Tensor all = m_.decode(prefix_, memory_, pad_);  // [N, t, V]: the whole prefix again
      logits = all.narrow(1, all.size(1) - 1, 1);
    }
    return log_softmax(logits.squeeze(1), -1);  // [N, V]
  }

  void reorder(const Tensor& index) override {
    NoGradGuard ng;
    memory_ = index_select(memory_, 0, index);
    if (pad_.defined()) pad_ = index_select(pad_.to(DType::i64), 0, index).to(DType::b8);
    for (nn::DecoderLayerCache& l : cache_.layers) l.cross_attn.reorder(index);
    reorder_beams(index);
  }
  // memory, padding and cross-attention keys are the same in all rows of a sentence
  void reorder_beams(const Tensor& index) override {
    NoGradGuard ng;
    if (prefix_.defined()) prefix_ = index_select(prefix_, 0, index);
    for (nn::DecoderLayerCache& l : cache_.layers) l.self_attn.reorder(index);
  }

 private:
  Transformer& m_;
  Tensor memory_, pad_, prefix_;
  nn::DecoderCache cache_;
  bool cached_;
};

}  // namespace

std::unique_ptr<IncrementalDecoder> Transformer::decoder(const Tensor& src, const Tensor& lengths,
                                                         bool use_cache, int64_t max_steps) {
  NoGradGuard ng;
  check_ids(src, "src");
  Tensor pad = data::padding_mask(lengths, src.size(1)).to(src.device());  // true = padding
  Tensor memory = encode(src, pad);
  const int64_t capacity = max_steps > 0 ? std::min(max_steps, options.max_len) : options.max_len;
  return std::make_unique<TransformerDecoder>(*this, memory, pad, use_cache, capacity);
}

std::vector<Hypothesis> Transformer::translate(const std::vector<std::vector<int64_t>>& src,
                                               const DecodeOptions& opt, int64_t batch_size,
                                               bool use_cache) {
  GRAFT_CHECK(batch_size > 0, "Transformer::translate: batch_size must be positive, got {}", batch_size);
  const bool was_training = is_training();
  eval();
  NoGradGuard ng;
  std::vector<Hypothesis> out;
  try {
    for (size_t i = 0; i < src.size(); i += size_t(batch_size)) {
      std::vector<std::vector<int64_t>> chunk(src.begin() + long(i),
                                              src.begin() + long(std::min(src.size(), i + size_t(batch_size))));
      data::Seq2SeqBatch b = data::make_seq2seq_batch(chunk);
      DecodeOptions o = opt;
      o.max_len = std::min<int64_t>(opt.max_len, options.max_len - 1);
      auto dec = decoder(b.src, b.src_lengths, use_cache, o.max_len + 1);
      auto hyps = opt.beam > 1 ? beam_search(*dec, b.size(), o) : greedy_decode(*dec, b.size(), o);
      out.insert(out.end(), hyps.begin(), hyps.end());
    }
  } catch (...) {
    train(was_training);
    throw;
  }
  train(was_training);
  return out;
}

Tensor Transformer::cross_attention(const std::vector<int64_t>& src,
                                    const std::vector<int64_t>& output, int64_t layer,
                                    int64_t head) {
  const int64_t L = int64_t(decoder_stack->layers.size());
  if (layer < 0) layer += L;
  GRAFT_CHECK(layer >= 0 && layer < L, "Transformer::cross_attention: layer must be in [-{}, {}), got {}",
              L, L, layer);
  GRAFT_CHECK(head >= -1 && head < options.nhead,
              "Transformer::cross_attention: head must be in [0, {}) or -1 (mean), got {}",
              options.nhead, head);
  const bool was_training = is_training();
  eval();
  NoGradGuard ng;
  data::Seq2SeqBatch b = data::make_seq2seq_batch({src}, {output});
  const Tensor& pad = b.src_key_padding_mask;
  Tensor memory = encode(b.src, pad);
  std::vector<Tensor> weights;
  nn::DecoderForward f;
  f.memory_key_padding_mask = pad;
  f.cross_attn_weights = &weights;
  decoder_stack->forward(embed(tgt_embed, b.tgt_in, 0), memory, f);
  train(was_training);
  Tensor w = weights[size_t(layer)].select(0, 0);  // [H, T, S]
  return head < 0 ? mean(w, {0}) : w.select(0, head);
}

}  // namespace graft::models
