// A decoder-only causal language model (GPT-2 style) on the Transformer blocks:
//
//   models::GPT lm({.vocab = 100, .d_model = 64, .nhead = 4, .num_layers = 2, .max_len = 128});
//   Tensor loss = lm.loss(ids);                                  // ids int64 [B, T+1]
//   auto out = lm.generate(prompt, 50, {.temperature = 0.8, .top_k = 20, .seed = 1});
//
// logits = LN_f(blocks(wte(x) + wpe(positions))) wte^T; each block is a pre-norm
// nn::TransformerEncoderLayer with causal self-attention (GELU feed-forward by default).
// Parameter names: wte.weight, wpe.weight, blocks.<i>.self_attn.in_proj_weight, ...,
// ln_f.weight. Generation keeps one KV cache per block, so each new token costs one position.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/layers.h"
#include "nn/transformer.h"
#include "ops/random.h"

namespace graft::models {

struct GPTOptions {
  int64_t vocab = 0;
  int64_t d_model = 128;
  int64_t nhead = 4;
  int64_t num_layers = 4;
  int64_t dim_feedforward = 0;  // 0: 4 d_model
  double dropout = 0.1;
  std::string activation = "gelu";
  int64_t max_len = 256;
};

struct SampleOptions {
  double temperature = 1.0;  // 0: greedy (arg-max)
  int64_t top_k = 0;         // 0: off; else sample among the k most likely tokens
  double top_p = 1.0;        // nucleus: the smallest set whose probability reaches top_p
  uint64_t seed = 0;         // the same seed gives the same tokens
  int64_t eos = -1;          // stop after this token (-1: never)
};

// Picks the next token from logits [V] (float) under opt; u is a uniform draw in [0, 1).
int64_t sample_token(const std::vector<double>& logits, const SampleOptions& opt, double u);

struct GPTCache {
  std::vector<nn::KVCache> layers;
  int64_t length = 0;
};

class GPT : public nn::Module {
 public:
  explicit GPT(GPTOptions options);  // graft::Error for bad options
  std::string repr() const override;
  // ids int64 [B, T] -> logits [B, T, V]; with a cache, ids are the next positions only.
  Tensor forward_ids(const Tensor& ids, GPTCache* cache = nullptr);
  // Next-token cross-entropy: ids [B, T+1]; predicts ids[:, 1:] from ids[:, :-1].
  Tensor loss(const Tensor& ids);
  // Continues `prompt` (non-empty) by up to max_new_tokens tokens (eval mode, no grad); the
  // returned vector holds the new tokens only. use_cache = false recomputes the whole context
  // at every step (for benchmarks and tests).
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                const SampleOptions& opt = {}, bool use_cache = true);

  const GPTOptions options;
  std::shared_ptr<nn::Embedding> wte;
  std::shared_ptr<nn::LearnedPositionalEmbedding> wpe;
  std::vector<std::shared_ptr<nn::TransformerEncoderLayer>> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
};

}  // namespace graft::models
