// Transformer blocks (Vaswani et al. 2017), named like torch.nn's so checkpoints map one to one:
//
//   TransformerEncoderLayer: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2
//   TransformerDecoderLayer: self_attn, multihead_attn, linear1, dropout, linear2,
//                            norm1, norm2, norm3, dropout1, dropout2, dropout3
//   TransformerEncoder / TransformerDecoder: layers.<i>.*, and norm.* (the final LayerNorm)
//
// The attention modules use packed projections (self_attn.in_proj_weight, as in PyTorch).
// Post-norm (the paper, norm_first = false):  x = norm(x + dropout(sublayer(x)))
// Pre-norm (norm_first = true):               x = x + dropout(sublayer(norm(x)))
// with a final LayerNorm on the stack (on by default for pre-norm, as is usual). The feed-forward
// block is linear2(dropout(act(linear1(x)))), act = ReLU (paper) or GELU. Tensors are batch first:
// src [B, S, C], tgt [B, T, C].
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/layers.h"

namespace graft::nn {

// ---- positional encodings

// The paper's table [max_len, d_model]: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...).
Tensor sinusoidal_positional_encoding(int64_t max_len, int64_t d_model, DType dtype = DType::f32);

// x [B, T, C] -> dropout(x + PE[offset : offset + T]); the table is the buffer "pe".
class PositionalEncoding : public Module {
 public:
  PositionalEncoding(int64_t d_model, double dropout = 0.1, int64_t max_len = 5000);
  Tensor forward(const Tensor& x) override { return forward(x, 0); }
  Tensor forward(const Tensor& x, int64_t offset);
  std::string repr() const override;
  const int64_t d_model, max_len;
  Tensor pe;  // [max_len, C]
  std::shared_ptr<Dropout> dropout;
};

// Learned positions: x [B, T, C] -> dropout(x + weight[offset : offset + T]), weight ~ N(0, 0.02).
class LearnedPositionalEmbedding : public Module {
 public:
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model, double dropout = 0.1);
  Tensor forward(const Tensor& x) override { return forward(x, 0); }
  Tensor forward(const Tensor& x, int64_t offset);
  std::string repr() const override;
  const int64_t max_len, d_model;
  Tensor weight;  // [max_len, C]
  std::shared_ptr<Dropout> dropout;
};

// ---- layers

struct TransformerLayerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool norm_first = false;  // pre-norm
  bool bias = true;
};

struct EncoderForward {
  Tensor mask;              // attn_mask for self-attention ([S, S], ...; MHA conventions)
  Tensor key_padding_mask;  // [B, S], true = padding
  bool is_causal = false;
  KVCache* cache = nullptr;  // incremental causal decoding (decoder-only LMs): src = new positions
};

// Per-layer decoding state: the self-attention keys/values so far and the encoder memory's.
struct DecoderLayerCache {
  KVCache self_attn;
  KVCache cross_attn{Tensor(), Tensor(), true};
};
struct DecoderCache {
  std::vector<DecoderLayerCache> layers;
  int64_t length = 0;  // target positions already decoded
};

struct DecoderForward {
  Tensor tgt_mask, memory_mask;
  Tensor tgt_key_padding_mask, memory_key_padding_mask;  // [B, T] / [B, S], true = padding
  bool tgt_is_causal = true;
  DecoderCache* cache = nullptr;  // incremental decoding: tgt holds only the new positions
  // When set, each layer appends its cross-attention weights [B, H, T, S] (composite path).
  std::vector<Tensor>* cross_attn_weights = nullptr;
};

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerLayerOptions& o);
  Tensor forward(const Tensor& src) override { return forward(src, EncoderForward{}); }
  Tensor forward(const Tensor& src, const EncoderForward& f);
  std::string repr() const override { return "TransformerEncoderLayer"; }
  const TransformerLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;

 private:
  Tensor feed_forward(const Tensor& x);
};

class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerOptions& o);
  Tensor forward(const Tensor& tgt) override;  // graft::Error: needs the memory
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderForward& f,
                 DecoderLayerCache* cache = nullptr);
  std::string repr() const override { return "TransformerDecoderLayer"; }
  const TransformerLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;

 private:
  Tensor feed_forward(const Tensor& x);
};

// A stack of encoder layers with an optional final LayerNorm ("norm").
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerLayerOptions& o, int64_t num_layers,
                     std::optional<bool> final_norm = std::nullopt);  // default: norm_first
  Tensor forward(const Tensor& src) override { return forward(src, EncoderForward{}); }
  Tensor forward(const Tensor& src, const EncoderForward& f);
  std::string repr() const override { return "TransformerEncoder"; }
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;  // null without a final norm
};

// A stack of decoder layers. With f.cache, tgt holds the new positions only and the cache keeps
// every layer's keys and values (cache->layers is sized on first use; length advances).
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerLayerOptions& o, int64_t num_layers,
                     std::optional<bool> final_norm = std::nullopt);
  Tensor forward(const Tensor& tgt) override;  // graft::Error: needs the memory
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderForward& f = {});
  std::string repr() const override { return "TransformerDecoder"; }
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers;
  std::shared_ptr<LayerNorm> norm;
};

// Boolean causal mask [T, T] in MHA convention: true above the diagonal (future = masked),
// like torch.nn.Transformer.generate_square_subsequent_mask (which uses -inf floats).
Tensor generate_square_subsequent_mask(int64_t T, Device device = Device::cpu());

}  // namespace graft::nn
