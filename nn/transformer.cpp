// Transformer blocks: positional encodings, encoder/decoder layers and stacks (nn/transformer.h).
#include "nn/transformer.h"

#include <cmath>

#include "nn/init.h"
#include "ops/error.h"

namespace graft::nn {

// ------------------------------------------------------------------ positional encodings

Tensor sinusoidal_positional_encoding(int64_t max_len, int64_t d_model, DType dtype) {
  GRAFT_CHECK(max_len > 0 && d_model > 0,
              "sinusoidal_positional_encoding: max_len and d_model must be positive, got {}, {}",
              max_len, d_model);
  Tensor t = empty({max_len, d_model}, DType::f64);  // a clear error when it cannot fit in memory
  double* pe = t.data<double>();
  for (int64_t p = 0; p < max_len; ++p)
    for (int64_t c = 0; c < d_model; ++c) {
      const int64_t i2 = c - c % 2;  // 2i
      const double angle = double(p) / std::pow(10000.0, double(i2) / double(d_model));
      pe[size_t(p * d_model + c)] = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  return t.to(dtype);
}

namespace {
void check_positions(const Tensor& x, int64_t offset, int64_t max_len, int64_t d_model,
                     const char* who) {
  check_defined(x, who);
  GRAFT_CHECK(x.dim() == 3 && x.size(2) == d_model, "{}: input must be [B, T, {}], got {}", who,
              d_model, x.shape());
  GRAFT_CHECK(offset >= 0 && offset + x.size(1) <= max_len,
              "{}: positions [{}, {}) exceed max_len {}; hint: build it with a larger max_len", who,
              offset, offset + x.size(1), max_len);
}
}  // namespace

PositionalEncoding::PositionalEncoding(int64_t d_model_, double p, int64_t max_len_)
    : d_model(d_model_), max_len(max_len_) {
  pe = register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
}
Tensor PositionalEncoding::forward(const Tensor& x, int64_t offset) {
  check_positions(x, offset, max_len, d_model, "PositionalEncoding");
  Tensor table = pe.dtype() == x.dtype() ? pe : pe.to(x.dtype());
  return dropout->forward(x + table.narrow(0, offset, x.size(1)));  // [B, T, C] + [T, C]
}
std::string PositionalEncoding::repr() const {
  return fmt::format("PositionalEncoding(d_model={}, max_len={}, dropout={})", d_model, max_len,
                     dropout->p);
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len_, int64_t d_model_, double p)
    : max_len(max_len_), d_model(d_model_) {
  GRAFT_CHECK(max_len > 0 && d_model > 0,
              "LearnedPositionalEmbedding: max_len and d_model must be positive, got {}, {}",
              max_len, d_model);
  weight = register_parameter("weight", empty({max_len, d_model}));
  init::normal_(weight, 0.0, 0.02);
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
}
Tensor LearnedPositionalEmbedding::forward(const Tensor& x, int64_t offset) {
  check_positions(x, offset, max_len, d_model, "LearnedPositionalEmbedding");
  return dropout->forward(x + weight.narrow(0, offset, x.size(1)));
}
std::string LearnedPositionalEmbedding::repr() const {
  return fmt::format("LearnedPositionalEmbedding(max_len={}, d_model={})", max_len, d_model);
}

// ------------------------------------------------------------------ layers

namespace {
void check_options(const TransformerLayerOptions& o, const char* who) {
  GRAFT_CHECK(o.activation == "relu" || o.activation == "gelu",
              "{}: activation must be \"relu\" or \"gelu\", got \"{}\"", who, o.activation);
  GRAFT_CHECK(o.dim_feedforward > 0, "{}: dim_feedforward must be positive, got {}", who,
              o.dim_feedforward);
}
Tensor activate(const Tensor& x, const std::string& act) { return act == "gelu" ? gelu(x) : relu(x); }
void check_input(const Tensor& x, int64_t C, const char* who, const char* name) {
  check_defined(x, who);
  GRAFT_CHECK(x.dim() == 3 && x.size(2) == C, "{}: {} must be [B, L, {}] (batch first), got {}",
              who, name, C, x.shape());
}

// The feed-forward block (linear1 -> activation -> dropout -> linear2) and the first two
// LayerNorms of a layer, registered under PyTorch's names in PyTorch's order.
template <class Layer> void register_feed_forward_and_norms(Layer& l, const TransformerLayerOptions& o) {
  l.linear1 = l.register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  l.dropout = l.register_module("dropout", std::make_shared<Dropout>(o.dropout));
  l.linear2 = l.register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  l.norm1 = l.register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  l.norm2 = l.register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
}
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& o) : options(o) {
  check_options(o, "TransformerEncoderLayer");
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                               o.d_model, o.nhead, o.dropout, o.bias));
  register_feed_forward_and_norms(*this, o);
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  return linear2->forward(dropout->forward(activate(linear1->forward(x), options.activation)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const EncoderForward& f) {
  check_input(src, options.d_model, "TransformerEncoderLayer", "src");
  MultiheadAttentionForward a;
  a.attn_mask = f.mask;
  a.key_padding_mask = f.key_padding_mask;
  a.is_causal = f.is_causal;
  a.cache = f.cache;
  auto sa = [&](const Tensor& x) { return self_attn->forward(x, x, x, a).output; };
  Tensor x = src;
  if (options.norm_first) {
    x = x + dropout1->forward(sa(norm1->forward(x)));
    return x + dropout2->forward(feed_forward(norm2->forward(x)));
  }
  x = norm1->forward(x + dropout1->forward(sa(x)));
  return norm2->forward(x + dropout2->forward(feed_forward(x)));
}

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& o) : options(o) {
  check_options(o, "TransformerDecoderLayer");
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                               o.d_model, o.nhead, o.dropout, o.bias));
  multihead_attn = register_module("multihead_attn", std::make_shared<MultiheadAttention>(
                                                         o.d_model, o.nhead, o.dropout, o.bias));
  register_feed_forward_and_norms(*this, o);
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerDecoderLayer::forward(const Tensor&) {
  throw Error("TransformerDecoderLayer: forward needs the encoder memory; hint: call "
              "forward(tgt, memory, options)");
}

Tensor TransformerDecoderLayer::feed_forward(const Tensor& x) {
  return linear2->forward(dropout->forward(activate(linear1->forward(x), options.activation)));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const DecoderForward& f, DecoderLayerCache* cache) {
  check_input(tgt, options.d_model, "TransformerDecoderLayer", "tgt");
  check_input(memory, options.d_model, "TransformerDecoderLayer", "memory");
  MultiheadAttentionForward sa_opt;
  sa_opt.attn_mask = f.tgt_mask;
  sa_opt.key_padding_mask = f.tgt_key_padding_mask;
  sa_opt.is_causal = f.tgt_is_causal;
  sa_opt.cache = cache ? &cache->self_attn : nullptr;
  MultiheadAttentionForward ca_opt;
  ca_opt.attn_mask = f.memory_mask;
  ca_opt.key_padding_mask = f.memory_key_padding_mask;
  ca_opt.cache = cache ? &cache->cross_attn : nullptr;
  auto sa = [&](const Tensor& x) { return self_attn->forward(x, x, x, sa_opt).output; };
  ca_opt.need_weights = f.cross_attn_weights != nullptr;
  ca_opt.average_attn_weights = false;
  auto ca = [&](const Tensor& x) {
    AttentionResult r = multihead_attn->forward(x, memory, memory, ca_opt);
    if (f.cross_attn_weights) f.cross_attn_weights->push_back(r.weights);
    return r.output;
  };
  Tensor x = tgt;
  if (options.norm_first) {
    x = x + dropout1->forward(sa(norm1->forward(x)));
    x = x + dropout2->forward(ca(norm2->forward(x)));
    return x + dropout3->forward(feed_forward(norm3->forward(x)));
  }
  x = norm1->forward(x + dropout1->forward(sa(x)));
  x = norm2->forward(x + dropout2->forward(ca(x)));
  return norm3->forward(x + dropout3->forward(feed_forward(x)));
}

// ------------------------------------------------------------------ stacks

namespace {
// Registers a stack's layers as "layers.0", "layers.1", ... and returns its final LayerNorm
// "norm" (by default only after pre-norm layers; null without one).
template <class Layer>
std::shared_ptr<LayerNorm> build_stack(Module& stack, const char* who, const TransformerLayerOptions& o,
                                       int64_t num_layers, std::optional<bool> final_norm,
                                       std::vector<std::shared_ptr<Layer>>& layers) {
  GRAFT_CHECK(num_layers > 0, "{}: num_layers must be positive, got {}", who, num_layers);
  auto list = stack.register_module("layers", std::make_shared<Module>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(list->register_module(std::to_string(i), std::make_shared<Layer>(o)));
  if (!final_norm.value_or(o.norm_first)) return nullptr;
  return stack.register_module("norm", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
}
}  // namespace

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& o, int64_t num_layers,
                                       std::optional<bool> final_norm) {
  norm = build_stack(*this, "TransformerEncoder", o, num_layers, final_norm, layers);
}

Tensor TransformerEncoder::forward(const Tensor& src, const EncoderForward& f) {
  GRAFT_CHECK(f.cache == nullptr,
              "TransformerEncoder: a KV cache belongs to one layer; hint: call the layers "
              "yourself with one KVCache each");
  Tensor x = src;
  for (auto& l : layers) x = l->forward(x, f);
  return norm ? norm->forward(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& o, int64_t num_layers,
                                       std::optional<bool> final_norm) {
  norm = build_stack(*this, "TransformerDecoder", o, num_layers, final_norm, layers);
}

Tensor TransformerDecoder::forward(const Tensor&) {
  throw Error("TransformerDecoder: forward needs the encoder memory; hint: call "
              "forward(tgt, memory, options)");
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const DecoderForward& f) {
  DecoderCache* cache = f.cache;
  if (cache && cache->layers.empty()) cache->layers.resize(layers.size());
  GRAFT_CHECK(!cache || cache->layers.size() == layers.size(),
              "TransformerDecoder: the cache has {} layers but the decoder has {}",
              cache ? cache->layers.size() : 0, layers.size());
  Tensor x = tgt;
  for (size_t i = 0; i < layers.size(); ++i)
    x = layers[i]->forward(x, memory, f, cache ? &cache->layers[i] : nullptr);
  if (cache) cache->length += tgt.size(1);
  return norm ? norm->forward(x) : x;
}

Tensor generate_square_subsequent_mask(int64_t T, Device device) {
  GRAFT_CHECK(T >= 0, "generate_square_subsequent_mask: size must be >= 0, got {}", T);
  TensorOptions i64 = TensorOptions(DType::i64).device(device);
  return gt(arange(T, i64).unsqueeze(0), arange(T, i64).unsqueeze(1));  // [T, T]: j > i
}

}  // namespace graft::nn
