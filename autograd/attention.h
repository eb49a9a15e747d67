// Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention):
//
//   out = dropout(softmax(scale q k^T + mask)) v        q [..., T, D], k [..., S, D], v [..., S, E]
//
// Two implementations that give the same values and gradients:
//  * fused (ops/cpu/attention.cpp): tiles over keys with an online softmax, never materialises
//    the [..., T, S] scores, saves only the row logsumexp for backward (which recomputes);
//  * composite: matmul, softmax, matmul from the op table (materialises the scores; the only
//    one that can return the attention weights).
// Masks: attn_mask broadcasts to [..., T, S]. A bool mask follows PyTorch's SDPA convention:
// true = take part in attention; a float mask is added to the scores (-inf masks out). The mask
// is a constant (no gradient flows into it). is_causal masks key j for query i when
// j > i + causal_offset (offset 0: PyTorch's top-left alignment; S - T for a query block at the
// end of a KV cache). A row whose keys are all masked gives zeros (PyTorch's math path gives
// NaN), and zero gradients. Dropout masks come from Philox: element (n, i, j) of the folded
// [N, T, S] scores is kept iff philox_uniform(seed, offset + (n T + i) S + j) >= p, so both
// implementations (and the fused backward) draw the same mask.
#pragma once
#include <optional>
#include <utility>

#include "autograd/tensor.h"
#include "ops/random.h"

namespace graft {

enum class AttentionImpl { automatic, fused, composite };

struct AttentionOptions {
  Tensor attn_mask;                 // bool (true = attend) or additive float; optional
  double dropout_p = 0.0;           // in [0, 1)
  bool is_causal = false;
  int64_t causal_offset = 0;        // see above
  std::optional<double> scale;      // default 1/sqrt(D)
  Generator* generator = nullptr;   // dropout stream (default: the global generator)
  // automatic: fused where the device has the kernel and rank <= 4, else composite.
  AttentionImpl impl = AttentionImpl::automatic;
};

// PyTorch's signature and argument order.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = {},
                                    Generator* gen = nullptr);
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opt);
// The output and the attention probabilities [..., T, S] (before dropout), always through the
// composite path (the weights are what it materialises anyway).
std::pair<Tensor, Tensor> scaled_dot_product_attention_with_weights(const Tensor& q,
                                                                    const Tensor& k,
                                                                    const Tensor& v,
                                                                    const AttentionOptions& opt);

}  // namespace graft
