// Attention for recurrent encoder-decoders (see nn/rnn_attention.h for the math and shapes).
#include "nn/rnn_attention.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops_rnn.h"
#include "nn/init.h"
#include "ops/error.h"

namespace graft::nn {

namespace {

constexpr double kMaskedScore = -1e30;  // finite, so 0 * log(weight) stays 0 at masked positions

Tensor vector_param(Module& m, const std::string& name, int64_t n) {
  Tensor& v = m.register_parameter(name, empty({n}));
  double k = 1.0 / std::sqrt(double(n));
  init::uniform_(v, -k, k);
  return v;
}

// bool [B, S] from 0/1 values.
Tensor bool_mask(const std::vector<double>& v, int64_t B, int64_t S, Device dev) {
  return ne(from_vector(v, {B, S}, DType::f64), zeros({}, DType::f64)).to(dev);
}

std::vector<double> mask_values(const Tensor& mask) { return mask.to(DType::f64).to_vector<double>(); }

}  // namespace

// ---------------------------------------------------------------- shared pieces
Attention::Attention(int64_t q, int64_t k, int64_t a) : query_dim(q), key_dim(k), attn_dim(a) {
  GRAFT_CHECK(q > 0 && k > 0 && a > 0,
              "attention: query_dim, key_dim and attn_dim must be positive, got {}, {}, {}", q, k, a);
}

std::string Attention::repr() const {
  return fmt::format("Attention(kind={}, query_dim={}, key_dim={}, attn_dim={})", kind(), query_dim,
                     key_dim, attn_dim);
}

// mask: the key_padding_mask, bool [B, S], true = padding.
Tensor Attention::check_inputs(const Tensor& query, const Tensor& keys, const Tensor& mask) const {
  std::string op = kind() + " attention";
  check_defined(query, op.c_str());
  check_defined(keys, op.c_str());
  GRAFT_CHECK(keys.dim() == 3 && keys.size(2) == key_dim,
              "{}: expected keys (encoder outputs) [B, S, {}], got {}", op, key_dim, keys.shape());
  const int64_t B = keys.size(0), S = keys.size(1);
  GRAFT_CHECK(S >= 1, "{}: the source has no positions (keys {})", op, keys.shape());
  GRAFT_CHECK(query.dim() == 2 && query.size(0) == B && query.size(1) == query_dim,
              "{}: expected query (decoder state) [{}, {}], got {}", op, B, query_dim, query.shape());
  GRAFT_CHECK(is_floating(query.dtype()) && query.dtype() == keys.dtype(),
              "{}: query and keys must have the same floating dtype, got {} and {}", op,
              query.dtype(), keys.dtype());
  if (!mask.defined()) return zeros({B, S}, TensorOptions(DType::b8).device(keys.device()));
  GRAFT_CHECK(mask.dtype() == DType::b8 && mask.shape() == Shape({B, S}),
              "{}: expected key_padding_mask bool [{}, {}] (true = padding), got {} {}", op, B, S,
              mask.dtype(), mask.shape());
  std::vector<double> m = mask_values(mask);
  for (int64_t b = 0; b < B; ++b) {
    bool any = false;
    for (int64_t s = 0; s < S; ++s) any |= m[size_t(b * S + s)] == 0;
    GRAFT_CHECK(any, "{}: key_padding_mask row {} is all padding (true), no position to attend; "
                "hint: true = padding, and every source needs at least one real token", op, b);
  }
  return mask;
}

AttentionOutput Attention::attend(const Tensor& query, const Tensor& keys,
                                  const Tensor& key_padding_mask, int64_t) {
  Tensor m = check_inputs(query, keys, key_padding_mask);
  Tensor w = masked_softmax(score(query, keys), m);  // softmax(e) over the real keys
  return {attention_context(w, keys), w};             // sum_s w_s h_s
}

Tensor masked_softmax(const Tensor& scores, const Tensor& key_padding_mask) {
  return softmax(where(key_padding_mask, full({}, kMaskedScore, scores.options()), scores), 1);
}

Tensor attention_context(const Tensor& weights, const Tensor& keys) {
  return matmul(weights.unsqueeze(1), keys).squeeze(1);  // [B, 1, S] @ [B, S, Ck] -> [B, Ck]
}

Tensor additive_score(const Tensor& uh, const Tensor& wq, const Tensor& v, bool fused) {
  if (fused && (uh.dtype() == DType::f32 || uh.dtype() == DType::f64)) return additive_attention_score(uh, wq, v);
  return matmul(tanh(uh + wq.unsqueeze(1)), v);  // v^T tanh(uh + wq) [B, S]
}

void Attention::use_precomputed(const Tensor& keys, const Tensor& proj) {
  if (!proj.defined()) return clear_precomputed();
  GRAFT_CHECK(keys.defined() && keys.dim() == 3 && proj.dim() == 3 && proj.size(0) == keys.size(0) &&
                  proj.size(1) == keys.size(1),
              "{} attention: a precomputed key projection {} does not match keys {}; hint: pass "
              "project_keys(keys)", kind(), proj.shape(), keys.defined() ? keys.shape().str() : "undefined");
  memo_keys_ = keys;
  memo_proj_ = proj;
}

// ---------------------------------------------------------------- Bahdanau
BahdanauAttention::BahdanauAttention(int64_t q, int64_t k, int64_t a) : Attention(q, k, a) {
  W = register_module("W", std::make_shared<Linear>(q, a, false));
  U = register_module("U", std::make_shared<Linear>(k, a, true));
  v = vector_param(*this, "v", a);
}

Tensor BahdanauAttention::project_keys(const Tensor& keys) { return U->forward(keys); }

Tensor BahdanauAttention::score(const Tensor& query, const Tensor& keys) {
  Tensor uh = memo(keys);
  if (!uh.defined()) uh = U->forward(keys);                  // U h [B, S, A]
  return additive_score(uh, W->forward(query), v, use_fused);  // v^T tanh(W s + U h)
}

// ---------------------------------------------------------------- Luong dot / general
LuongAttention::LuongAttention(const std::string& kind_, int64_t q, int64_t k)
    : Attention(q, k, k), score_kind(kind_) {
  GRAFT_CHECK(kind_ == "dot" || kind_ == "general", "LuongAttention: score must be \"dot\" or "
              "\"general\", got '{}'", kind_);
  if (kind_ == "dot")
    GRAFT_CHECK(q == k, "dot attention: query_dim ({}) must equal key_dim ({}); hint: use "
                "\"general\" for different widths", q, k);
  else
    W = register_module("W", std::make_shared<Linear>(q, k, false));
}

Tensor LuongAttention::project_keys(const Tensor& keys) {
  if (!W) return {};
  return matmul(keys, W->weight);  // h W [B, S, Cq] (W: [Ck, Cq])
}

Tensor LuongAttention::score(const Tensor& query, const Tensor& keys) {
  Tensor hw = W ? memo(keys) : Tensor();
  if (hw.defined()) return matmul(hw, query.unsqueeze(2)).squeeze(2);  // e[b, s] = (h_s W) . s
  Tensor q = W ? W->forward(query) : query;        // [B, Ck]
  return matmul(keys, q.unsqueeze(2)).squeeze(2);  // e[b, s] = h_s . q
}

// ---------------------------------------------------------------- Luong concat
ConcatAttention::ConcatAttention(int64_t q, int64_t k, int64_t a) : Attention(q, k, a) {
  W = register_module("W", std::make_shared<Linear>(q + k, a, false));
  v = vector_param(*this, "v", a);
}

Tensor ConcatAttention::project_keys(const Tensor& keys) {
  return linear(keys, W->weight.narrow(1, query_dim, key_dim));  // W_h h [B, S, A]
}

Tensor ConcatAttention::score(const Tensor& query, const Tensor& keys) {
  Tensor wh = memo(keys);
  if (!wh.defined()) wh = project_keys(keys);                    // W_h h [B, S, A]
  Tensor ws = linear(query, W->weight.narrow(1, 0, query_dim));  // W_s s [B, A]
  return additive_score(wh, ws, v, use_fused);  // v^T tanh(W [s; h]) = v^T tanh(W_s s + W_h h)
}

// ---------------------------------------------------------------- Luong local
LocalAttention::LocalAttention(bool predictive_, int64_t q, int64_t k, int64_t a, int64_t window_)
    : Attention(q, k, a), predictive(predictive_), window(window_) {
  GRAFT_CHECK(window >= 1, "{} attention: window D must be at least 1, got {}",
              predictive ? "local-p" : "local-m", window);
  W = register_module("W", std::make_shared<Linear>(q, k, false));
  if (predictive) {
    W_p = register_module("W_p", std::make_shared<Linear>(q, a, false));
    v_p = vector_param(*this, "v_p", a);
  }
}

Tensor LocalAttention::score(const Tensor& query, const Tensor& keys) {
  return matmul(keys, W->forward(query).unsqueeze(2)).squeeze(2);  // general: s^T W h
}

Tensor LocalAttention::position(const Tensor& query, const Tensor& lengths, int64_t t) {
  if (predictive)  // p_t = len * sigmoid(v_p^T tanh(W_p s))
    return lengths * sigmoid(matmul(tanh(W_p->forward(query)), v_p));
  GRAFT_CHECK(t >= 0, "local-m attention: decoder step t must be >= 0, got {}", t);
  std::vector<double> len = lengths.to_vector<double>(), p(len.size());
  for (size_t b = 0; b < len.size(); ++b) p[b] = std::min(double(t), len[b] - 1);  // p_t = t
  return from_vector(p, {int64_t(p.size())}, query.options());
}

AttentionOutput LocalAttention::attend(const Tensor& query, const Tensor& keys,
                                       const Tensor& key_padding_mask, int64_t t) {
  Tensor m = check_inputs(query, keys, key_padding_mask);
  const int64_t B = keys.size(0), S = keys.size(1);
  std::vector<double> mv = mask_values(m), len(size_t(B), 0.0);  // mv: 1 = padding
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) len[size_t(b)] += mv[size_t(b * S + s)] == 0;
  const TensorOptions opt = query.options();
  Tensor p = position(query, from_vector(len, {B}, opt), t);  // [B]
  last_position = p;
  Tensor dist = arange(0.0, double(S), 1.0, opt).unsqueeze(0) - p.unsqueeze(1);  // [B, S]: s - p_t
  // outside [B, S], true = left out: padding, or outside the window |s - p_t| <= D (when the
  // window holds no real token: only the padding)
  std::vector<double> dv = dist.detach().to_vector<double>(), out(mv.size());
  for (int64_t b = 0; b < B; ++b) {
    bool any = false;
    for (int64_t s = 0; s < S; ++s) {
      size_t i = size_t(b * S + s);
      out[i] = mv[i] != 0 || std::abs(dv[i]) > double(window);
      any |= out[i] == 0;
    }
    if (!any)
      for (int64_t s = 0; s < S; ++s) out[size_t(b * S + s)] = mv[size_t(b * S + s)];
  }
  Tensor outside = bool_mask(out, B, S, keys.device());
  const double sigma = double(window) / 2;
  Tensor log_gauss = square(dist) * (-1.0 / (2 * sigma * sigma));  // -(s - p_t)^2 / (2 sigma^2)
  Tensor e = score(query, keys);
  Tensor w = renormalize ? masked_softmax(e + log_gauss, outside)
                         : masked_softmax(e, outside) * exp(log_gauss);
  return {attention_context(w, keys), w};
}

// ---------------------------------------------------------------- hard (stochastic)
HardAttention::HardAttention(int64_t q, int64_t k, int64_t a, uint64_t seed)
    : BahdanauAttention(q, k, a), gen(seed) {}

AttentionOutput HardAttention::attend(const Tensor& query, const Tensor& keys,
                                      const Tensor& key_padding_mask, int64_t) {
  Tensor m = check_inputs(query, keys, key_padding_mask);
  const int64_t B = keys.size(0), S = keys.size(1);
  Tensor e = where(m, full({}, kMaskedScore, keys.options()), score(query, keys));  // padding: -1e30
  Tensor w = softmax(e, 1);
  sample_ = HardSample{};
  if (!is_training() && !eval_argmax) return {attention_context(w, keys), w};  // expectation
  std::vector<double> wv = w.detach().to_vector<double>(), onehot(size_t(B * S), 0.0);
  std::vector<int64_t> idx(static_cast<size_t>(B));
  if (is_training()) {
    std::vector<double> u = uniform({B}, 0, 1, DType::f64, &gen).to_vector<double>();
    for (int64_t b = 0; b < B; ++b) {  // inverse CDF: the first s with cumsum > u * total
      double total = 0, acc = 0;
      for (int64_t s = 0; s < S; ++s) total += wv[size_t(b * S + s)];
      int64_t pick = -1, last = 0;
      for (int64_t s = 0; s < S; ++s) {
        double ws = wv[size_t(b * S + s)];
        if (ws <= 0) continue;
        last = s;
        acc += ws;
        if (pick < 0 && acc > u[size_t(b)] * total) pick = s;
      }
      idx[size_t(b)] = pick < 0 ? last : pick;
    }
  } else {
    for (int64_t b = 0; b < B; ++b) {
      int64_t best = 0;
      for (int64_t s = 1; s < S; ++s)
        if (wv[size_t(b * S + s)] > wv[size_t(b * S + best)]) best = s;
      idx[size_t(b)] = best;
    }
  }
  for (int64_t b = 0; b < B; ++b) onehot[size_t(b * S + idx[size_t(b)])] = 1;
  Tensor oh = from_vector(onehot, {B, S}, keys.options());
  if (is_training()) {
    Tensor logw = log_softmax(e, 1);
    sample_.index = from_vector(idx, {B});
    sample_.log_prob = sum(logw * oh, {1});    // log w[b, index[b]]
    sample_.entropy = -sum(w * logw, {1});     // -sum_s w log w (masked: 0 * finite = 0)
  }
  return {attention_context(oh, keys), w};
}

// ---------------------------------------------------------------- factory
const std::vector<std::string>& attention_names() {
  static const std::vector<std::string> names{"bahdanau", "dot", "general", "concat",
                                              "local-m", "local-p", "hard"};
  return names;
}

std::shared_ptr<Attention> make_attention(const std::string& name, int64_t q, int64_t k, int64_t a,
                                          int64_t window) {
  if (name == "bahdanau") return std::make_shared<BahdanauAttention>(q, k, a);
  if (name == "dot" || name == "general") return std::make_shared<LuongAttention>(name, q, k);
  if (name == "concat") return std::make_shared<ConcatAttention>(q, k, a);
  if (name == "local-m") return std::make_shared<LocalAttention>(false, q, k, a, window);
  if (name == "local-p") return std::make_shared<LocalAttention>(true, q, k, a, window);
  if (name == "hard") return std::make_shared<HardAttention>(q, k, a);
  std::string list;
  for (const std::string& n : attention_names()) list += (list.empty() ? "" : ", ") + n;
  throw Error(fmt::format("make_attention: unknown attention '{}'; valid names: {}", name, list));
}

// ---------------------------------------------------------------- Show, Attend and Tell helpers
AttentionGate::AttentionGate(int64_t hidden_size) {
  f_beta = register_module("f_beta", std::make_shared<Linear>(hidden_size, 1));
}

Tensor AttentionGate::forward(const Tensor& h_prev) {
  return sigmoid(f_beta->forward(h_prev));  // beta = sigmoid(f_beta(h_{t-1})) [B, 1]
}

std::string AttentionGate::repr() const {
  return fmt::format("AttentionGate(hidden_size={})", f_beta->in_features);
}

Tensor doubly_stochastic_penalty(const std::vector<Tensor>& ws, double lambda, const Tensor& key_padding_mask) {
  GRAFT_CHECK(!ws.empty(), "doubly_stochastic_penalty: expected the weights of at least one step");
  for (size_t t = 0; t < ws.size(); ++t) {
    check_defined(ws[t], "doubly_stochastic_penalty");
    GRAFT_CHECK(ws[t].dim() == 2 && ws[t].shape() == ws[0].shape(),
                "doubly_stochastic_penalty: step {} has weights {}, expected [B, S] like step 0 {}",
                t, ws[t].shape(), ws[0].shape());
  }
  Tensor total = ws[0];
  for (size_t t = 1; t < ws.size(); ++t) total = total + ws[t];  // sum_t alpha_t [B, S]
  Tensor pen = square(1.0 - total);                              // (1 - sum_t alpha_t,i)^2
  if (const Tensor& pad = key_padding_mask; pad.defined()) {
    GRAFT_CHECK(pad.dtype() == DType::b8 && pad.shape() == total.shape(),
                "doubly_stochastic_penalty: expected key_padding_mask bool {} (true = padding), "
                "got {} {}", total.shape(), pad.dtype(), pad.shape());
    pen = where(pad, zeros({}, pen.options()), pen);  // padded positions add 0
  }
  return mean(sum(pen, {1})) * lambda;
}

Reinforce::Reinforce(double decay_, double entropy_weight_) : decay(decay_), entropy_weight(entropy_weight_) {
  GRAFT_CHECK(decay >= 0 && decay < 1, "Reinforce: decay must be in [0, 1), got {}", decay);
}

Tensor Reinforce::loss(const Tensor& reward, const Tensor& log_prob, const Tensor& entropy) {
  check_defined(reward, "Reinforce::loss");
  check_defined(log_prob, "Reinforce::loss");
  GRAFT_CHECK(reward.dim() == 1 && log_prob.shape() == reward.shape(),
              "Reinforce::loss: expected reward and log_prob [B], got {} and {}", reward.shape(),
              log_prob.shape());
  Tensor r = reward.detach().to(log_prob.dtype());
  double rm = mean(r).item();
  if (!started_) baseline_ = rm, started_ = true;
  Tensor l = -mean((r - baseline_) * log_prob);  // -(r - b) log p: the score-function estimator
  if (entropy.defined()) {
    GRAFT_CHECK(entropy.shape() == reward.shape(), "Reinforce::loss: expected entropy {}, got {}",
                reward.shape(), entropy.shape());
    l = l - mean(entropy) * entropy_weight;  // entropy bonus
  }
  baseline_ = decay * baseline_ + (1 - decay) * rm;
  return l;
}

}  // namespace graft::nn
