// nn::MultiheadAttention, like torch.nn.MultiheadAttention with batch_first=True:
//
//   nn::MultiheadAttention mha(/*embed_dim=*/64, /*num_heads=*/4, /*dropout=*/0.1);
//   auto [y, w] = mha.forward(x, x, x, {.key_padding_mask = pad, .is_causal = true});
//
// query [B, T, C], key [B, S, kdim], value [B, S, vdim] -> output [B, T, C]. The heads are
// computed by graft::scaled_dot_product_attention (the fused kernel unless weights are asked
// for). Parameter names are PyTorch's, so checkpoints load both ways:
//   packed (kdim == vdim == embed_dim, the default): in_proj_weight [3C, C], in_proj_bias [3C];
//   separate (kdim or vdim differ, or packed = false): q_proj_weight [C, C],
//     k_proj_weight [C, kdim], v_proj_weight [C, vdim], in_proj_bias [3C];
//   out_proj.weight [C, C], out_proj.bias [C].
// Masks use PyTorch's nn.MultiheadAttention convention (the opposite of SDPA's bool masks):
//   key_padding_mask [B, S]: bool true = this key is padding (ignored), or float (added);
//   attn_mask [T, S], [B*H, T, S] or [B, H, T, S]: bool true = not allowed, or float (added);
//   is_causal: query i sees keys j <= i (+ the cached length with a KV cache).
// Any combination is allowed; a query whose keys are all masked gets zeros.
//
// Incremental decoding: pass a KVCache (nn/kv_cache.h). Self-attention appends this call's keys
// and values to it, in place in preallocated buffers (so a decoder feeds one token at a time and
// attends to everything so far); with
// `static_kv` (cross-attention over an encoder memory) the first call projects the memory and
// later calls reuse it without looking at `key`/`value`.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "autograd/attention.h"
#include "nn/kv_cache.h"
#include "nn/layers.h"

namespace graft::nn {

struct MultiheadAttentionForward {
  Tensor key_padding_mask;   // [B, S] (S = all keys, cached ones included)
  Tensor attn_mask;          // [T, S], [B*H, T, S] or [B, H, T, S]
  bool is_causal = false;
  bool need_weights = false;           // return the attention probabilities
  bool average_attn_weights = true;    // weights [B, T, S] (mean over heads) or [B, H, T, S]
  KVCache* cache = nullptr;
};

struct AttentionResult {
  Tensor output;   // [B, T, C]
  Tensor weights;  // undefined unless need_weights
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     std::optional<int64_t> kdim = std::nullopt,
                     std::optional<int64_t> vdim = std::nullopt, bool packed = true);
  AttentionResult forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const MultiheadAttentionForward& opt = {});
  // Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override { return forward(x, x, x).output; }
  std::string repr() const override;
  void reset_parameters();

  const int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  const double dropout;
  const bool packed;
  Tensor in_proj_weight;                              // packed
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // separate
  Tensor in_proj_bias;                                // [3C] (undefined when bias = false)
  std::shared_ptr<Linear> out_proj;
  // Which implementation the heads use (tests compare them); automatic picks the fused kernel.
  AttentionImpl impl = AttentionImpl::automatic;

 private:
  Tensor project(const Tensor& x, int which) const;  // 0 q, 1 k, 2 v: [B, L, *] -> [B, H, L, Dh]
};

}  // namespace graft::nn
