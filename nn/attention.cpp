// nn::MultiheadAttention: projections, head split/merge, mask conversion and the KV cache; the
// attention itself is graft::scaled_dot_product_attention (autograd/ops_attention.cpp).
#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "nn/init.h"
#include "ops/error.h"

namespace graft::nn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();


// PyTorch MHA masks (bool true = masked out, or additive float) -> additive float in q's dtype.
Tensor additive(const Tensor& m, const Tensor& q, const char* what) {
  GRAFT_CHECK(m.dtype() == DType::b8 || is_floating(m.dtype()),
              "MultiheadAttention: {} must be bool (true = masked out) or floating (added to the "
              "scores), got {}",
              what, m.dtype());
  GRAFT_CHECK(m.device() == q.device(), "MultiheadAttention: {} is on {} but the query is on {}",
              what, m.device().str(), q.device().str());
  NoGradGuard ng;
  if (m.dtype() == DType::b8) return where(m, full(Shape{}, -kInf, q.options()), zeros(Shape{}, q.options()));
  return m.detach().to(q.dtype());
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, double dropout_,
                                       bool bias, std::optional<int64_t> kdim_,
                                       std::optional<int64_t> vdim_, bool packed_)
    : embed_dim(embed_dim_),
      num_heads(num_heads_),
      head_dim(num_heads_ > 0 ? embed_dim_ / num_heads_ : 0),
      kdim(kdim_.value_or(embed_dim_)),
      vdim(vdim_.value_or(embed_dim_)),
      dropout(dropout_),
      packed(packed_ && kdim == embed_dim_ && vdim == embed_dim_) {
  GRAFT_CHECK(embed_dim > 0 && num_heads > 0,
              "MultiheadAttention: embed_dim and num_heads must be positive, got {} and {}",
              embed_dim, num_heads);
  GRAFT_CHECK(embed_dim % num_heads == 0,
              "MultiheadAttention: embed_dim ({}) must be divisible by num_heads ({})", embed_dim,
              num_heads);
  GRAFT_CHECK(kdim > 0 && vdim > 0, "MultiheadAttention: kdim and vdim must be positive, got {}, {}",
              kdim, vdim);
  GRAFT_CHECK(dropout >= 0.0 && dropout < 1.0,
              "MultiheadAttention: dropout must be in [0, 1), got {}", dropout);
  const int64_t C = embed_dim;
  if (packed) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * C, C}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({C, C}));
    k_proj_weight = register_parameter("k_proj_weight", empty({C, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({C, vdim}));
  }
  if (bias) in_proj_bias = register_parameter("in_proj_bias", empty({3 * C}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(C, C, bias));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  // PyTorch's: xavier_uniform_ on the input projections, zero biases.
  if (packed) {
    init::xavier_uniform_(in_proj_weight);
  } else {
    init::xavier_uniform_(q_proj_weight);
    init::xavier_uniform_(k_proj_weight);
    init::xavier_uniform_(v_proj_weight);
  }
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

std::string MultiheadAttention::repr() const {
  return fmt::format("MultiheadAttention(embed_dim={}, num_heads={}, dropout={}, kdim={}, vdim={}, "
                     "packed={})",
                     embed_dim, num_heads, dropout, kdim, vdim, packed);
}

Tensor MultiheadAttention::project(const Tensor& x, int which) const {
  const int64_t C = embed_dim;
  Tensor w = packed ? in_proj_weight.narrow(0, which * C, C)
                    : (which == 0 ? q_proj_weight : which == 1 ? k_proj_weight : v_proj_weight);
  Tensor b = in_proj_bias.defined() ? in_proj_bias.narrow(0, which * C, C) : Tensor();
  Tensor y = linear(x, w, b);  // [B, L, C]
  return y.reshape({x.size(0), x.size(1), num_heads, head_dim}).transpose(1, 2);  // [B, H, L, Dh]
}

AttentionResult MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                            const Tensor& value,
                                            const MultiheadAttentionForward& opt) {
  check_defined(query, "MultiheadAttention");
  GRAFT_CHECK(query.dim() == 3 && query.size(2) == embed_dim,
              "MultiheadAttention: query must be [B, T, {}] (batch first), got {}", embed_dim,
              query.shape());
  const int64_t B = query.size(0), T = query.size(1), H = num_heads;
  KVCache* cache = opt.cache;
  const bool reuse = cache && cache->static_kv && cache->k.defined();
  if (!reuse) {
    check_defined(key, "MultiheadAttention");
    check_defined(value, "MultiheadAttention");
    GRAFT_CHECK(key.dim() == 3 && key.size(2) == kdim && key.size(0) == B,
                "MultiheadAttention: key must be [B={}, S, kdim={}], got {}", B, kdim, key.shape());
    GRAFT_CHECK(value.dim() == 3 && value.size(2) == vdim && value.size(0) == B &&
                    value.size(1) == key.size(1),
                "MultiheadAttention: value must be [B={}, S={}, vdim={}], got {}", B, key.size(1),
                vdim, value.shape());
  }

  Tensor q, k, v;  // [B, H, L, Dh]
  if (packed && !reuse && query.same(key) && key.same(value)) {
    // self-attention: one matmul for the three projections
    Tensor qkv = linear(query, in_proj_weight, in_proj_bias);  // [B, T, 3C]
    std::vector<Tensor> parts = chunk(qkv, 3, -1);
    auto heads = [&](const Tensor& y) { return y.reshape({B, T, H, head_dim}).transpose(1, 2); };
    q = heads(parts[0]);
    k = heads(parts[1]);
    v = heads(parts[2]);
  } else {
    q = project(query, 0);
    if (!reuse) {
      k = project(key, 1);
      v = project(value, 2);
    }
  }
  if (cache) {
    if (!reuse) cache->append(k, v);  // in place: [B, H, S_cached + L, Dh] (nn/kv_cache.h)
    k = cache->k;
    v = cache->v;
  }
  const int64_t S = k.size(2);

  Tensor bias;  // additive, broadcast to [B, H, T, S]
  if (opt.key_padding_mask.defined()) {
    const Tensor& m = opt.key_padding_mask;
    GRAFT_CHECK(m.dim() == 2 && m.size(0) == B && m.size(1) == S,
                "MultiheadAttention: key_padding_mask must be [B={}, S={}] (all keys, cached "
                "ones included), got {}",
                B, S, m.shape());
    bias = additive(m, query, "key_padding_mask").reshape({B, 1, 1, S});
  }
  if (opt.attn_mask.defined()) {
    const Tensor& m = opt.attn_mask;
    Tensor a = additive(m, query, "attn_mask");
    if (m.dim() == 2 && m.size(0) == T && m.size(1) == S) {
    } else if (m.dim() == 3 && m.size(0) == B * H && m.size(1) == T && m.size(2) == S) {
      a = a.reshape({B, H, T, S});
    } else {
      GRAFT_CHECK(m.dim() == 4 && m.size(0) == B && m.size(1) == H && m.size(2) == T &&
                      m.size(3) == S,
                  "MultiheadAttention: attn_mask must be [T={}, S={}], [B*H={}, T, S] or [B, H, T, "
                  "S], got {}",
                  T, S, B * H, m.shape());
    }
    NoGradGuard ng;
    bias = bias.defined() ? bias + a : a;
  }

  AttentionOptions ao;
  ao.attn_mask = bias;
  ao.is_causal = opt.is_causal;
  ao.causal_offset = S - T;  // queries are the last T positions (0 without a cache)
  ao.dropout_p = is_training() ? dropout : 0.0;
  ao.impl = impl;
  AttentionResult r;
  Tensor heads;  // [B, H, T, Dh]
  if (opt.need_weights) {
    auto [o, w] = scaled_dot_product_attention_with_weights(q, k, v, ao);
    heads = o;
    r.weights = opt.average_attn_weights ? mean(w, {1}) : w;
  } else {
    heads = scaled_dot_product_attention(q, k, v, ao);
  }
  r.output = out_proj->forward(heads.transpose(1, 2).reshape({B, T, embed_dim}));
  return r;
}

}  // namespace graft::nn
