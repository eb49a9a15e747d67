// The classic attention mechanisms of recurrent encoder-decoders, each returning the context
// vector and the attention weights. Letters: B batch, S source length, Cq query (decoder state)
// width, Ck key (encoder output) width, A attention width.
//
//   auto attn = nn::make_attention("bahdanau", /*query_dim=*/256, /*key_dim=*/512, /*attn_dim=*/256);
//   Tensor pad = data::padding_mask(src_lengths, S);  // bool [B, S], true = padding
//   nn::AttentionOutput a = attn->attend(s, enc_out, pad, t);
//   a.context;   // [B, Ck] = sum_s a.weights[b, s] enc_out[b, s]
//   a.weights;   // [B, S], rows sum to 1 over real positions, exactly 0 at padded ones
//
// Masks follow PyTorch's convention (as nn::MultiheadAttention's key_padding_mask does):
// key_padding_mask is bool [B, S] with true = padding, i.e. that key is masked out and gets
// zero weight; false = a real token that is attended. Undefined = no padding.
//
// Scores e[b, s] (s: the query, h_s: the keys):
//   "bahdanau"  v^T tanh(W s + U h_s)            (Bahdanau et al. 2015, additive; U has a bias)
//   "dot"       s^T h_s                          (Luong et al. 2015; needs Cq == Ck)
//   "general"   s^T W h_s
//   "concat"    v^T tanh(W [s; h_s])
//   "local-m"   general, in the window |s' - p_t| <= D around p_t = min(t, len - 1)
//   "local-p"   general, window around p_t = len * sigmoid(v_p^T tanh(W_p s)), plus the Gaussian
//               exp(-(s' - p_t)^2 / (2 sigma^2)), sigma = D / 2 (p_t is learnt through it)
//   "hard"      Show, Attend and Tell's stochastic attention over Bahdanau scores: in training
//               the context is ONE position sampled from the weights (last_sample() gives the
//               index, its log-probability and the entropy for REINFORCE); in eval mode the
//               expectation (or the argmax, eval_argmax = true).
// weights = softmax over the real (key_padding_mask false) positions. For the local kinds the
// Gaussian is applied before normalising (softmax(e - (s' - p_t)^2 / 2 sigma^2) over the
// window), so the weights stay a distribution; renormalize = false gives Luong's unnormalised
// product softmax(e) * Gaussian instead.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/module.h"

namespace graft::nn {

struct AttentionOutput {
  Tensor context;  // [B, Ck]
  Tensor weights;  // [B, S]
};

class Attention : public Module {
 public:
  // query: decoder state [B, Cq]; keys: encoder outputs [B, S, Ck]; key_padding_mask: bool
  // [B, S], true = padding (masked out; undefined = no padding; every row needs at least one
  // false, i.e. one real token); t: decoder step (used by local-m). By default global
  // attention: weights = softmax of score() over the real keys, context = their weighted sum.
  virtual AttentionOutput attend(const Tensor& query, const Tensor& keys,
                                 const Tensor& key_padding_mask, int64_t t);
  // Raw scores e [B, S] (before masking and normalisation).
  virtual Tensor score(const Tensor& query, const Tensor& keys) = 0;
  virtual std::string kind() const = 0;
  std::string repr() const override;
  // Optional speed-up: computes the key-side projection once (bahdanau/hard: U h, concat:
  // W_h h, general: h W) for all following attend() calls with the SAME keys tensor (same
  // handle), e.g. every decoder step of one batch; attend() with other keys ignores it. Call it
  // again after the parameters change (the memo is a graph node of the current parameters).
  void precompute(const Tensor& keys) { use_precomputed(keys, project_keys(keys)); }
  // The key-side projection of keys [B, S, Ck] ([B, S, A]; general: [B, S, Cq]), or an
  // undefined tensor for kinds without one (dot, local-m, local-p).
  virtual Tensor project_keys(const Tensor& keys) { (void)keys; return {}; }
  // Uses proj = project_keys(keys) (possibly reordered with keys, e.g. by beam search) for the
  // following attend() calls with these keys. An undefined proj clears the memo.
  void use_precomputed(const Tensor& keys, const Tensor& proj);
  void clear_precomputed() { memo_keys_ = Tensor(), memo_proj_ = Tensor(); }
  // bahdanau, hard, concat: the score v^T tanh(.) as one fused node (CPU, float32/float64);
  // false: the same math as tape ops (add, tanh, matmul).
  bool use_fused = true;

  const int64_t query_dim, key_dim, attn_dim;

 protected:
  Attention(int64_t query_dim, int64_t key_dim, int64_t attn_dim);
  // Checks shapes/dtypes and returns the key padding mask (all false if undefined), bool
  // [B, S], true = padding.
  Tensor check_inputs(const Tensor& query, const Tensor& keys, const Tensor& key_padding_mask) const;
  // The memo from precompute() if it was made for these keys, else an undefined tensor.
  Tensor memo(const Tensor& keys) const { return memo_keys_.defined() && memo_keys_.same(keys) ? memo_proj_ : Tensor(); }
  Tensor memo_keys_, memo_proj_;
};

// softmax over dim 1 of scores [B, S] leaving out key_padding_mask's true (padded) positions
// (bool [B, S]): exactly 0 there.
Tensor masked_softmax(const Tensor& scores, const Tensor& key_padding_mask);
// context [B, Ck] = sum_s weights[b, s] keys[b, s, :]
Tensor attention_context(const Tensor& weights, const Tensor& keys);
// v^T tanh(uh + wq) [B, S] for uh [B, S, A], wq [B, A], v [A]: the fused node
// (additive_attention_score) when fused is set and the inputs allow it, else tape ops.
Tensor additive_score(const Tensor& uh, const Tensor& wq, const Tensor& v, bool fused);

class BahdanauAttention : public Attention {
 public:
  BahdanauAttention(int64_t query_dim, int64_t key_dim, int64_t attn_dim);
  Tensor score(const Tensor& query, const Tensor& keys) override;
  Tensor project_keys(const Tensor& keys) override;  // U h [B, S, A]
  std::string kind() const override { return "bahdanau"; }
  std::shared_ptr<Linear> W, U;  // W: Cq -> A (no bias), U: Ck -> A
  Tensor v;                      // [A]
};

// "dot" and "general" (Luong global).
class LuongAttention : public Attention {
 public:
  LuongAttention(const std::string& score_kind, int64_t query_dim, int64_t key_dim);
  Tensor score(const Tensor& query, const Tensor& keys) override;
  Tensor project_keys(const Tensor& keys) override;  // general: h W [B, S, Cq]; dot: none
  std::string kind() const override { return score_kind; }
  const std::string score_kind;
  std::shared_ptr<Linear> W;  // general: Cq -> Ck (no bias), so s^T W h = (W^T s)^T h
};

class ConcatAttention : public Attention {
 public:
  ConcatAttention(int64_t query_dim, int64_t key_dim, int64_t attn_dim);
  Tensor score(const Tensor& query, const Tensor& keys) override;
  Tensor project_keys(const Tensor& keys) override;  // W_h h [B, S, A]
  std::string kind() const override { return "concat"; }
  // Cq + Ck -> A (no bias); computed as W[:, :Cq] s + W[:, Cq:] h (the same product)
  std::shared_ptr<Linear> W;
  Tensor v;                   // [A]
};

// "local-m" (predictive = false) and "local-p" (predictive = true); score "general".
class LocalAttention : public Attention {
 public:
  LocalAttention(bool predictive, int64_t query_dim, int64_t key_dim, int64_t attn_dim, int64_t window);
  AttentionOutput attend(const Tensor& query, const Tensor& keys, const Tensor& key_padding_mask, int64_t t) override;
  Tensor score(const Tensor& query, const Tensor& keys) override;
  std::string kind() const override { return predictive ? "local-p" : "local-m"; }
  // The window centre p_t [B] for this query (local-p: differentiable) and valid lengths.
  Tensor position(const Tensor& query, const Tensor& lengths, int64_t t);
  const bool predictive;
  const int64_t window;  // D
  bool renormalize = true;
  std::shared_ptr<Linear> W;    // general score: Cq -> Ck
  std::shared_ptr<Linear> W_p;  // local-p: Cq -> A (no bias)
  Tensor v_p;                   // local-p: [A]
  Tensor last_position;         // p_t of the last attend() call, [B]
};

// Hard (stochastic) attention, Show, Attend and Tell (Xu et al. 2015), over Bahdanau scores.
struct HardSample {
  Tensor index;     // int64 [B]: the sampled source position
  Tensor log_prob;  // [B]: log weights[b, index[b]] (differentiable: the REINFORCE term)
  Tensor entropy;   // [B]: -sum_s w log w over valid positions (differentiable)
};
class HardAttention : public BahdanauAttention {
 public:
  HardAttention(int64_t query_dim, int64_t key_dim, int64_t attn_dim, uint64_t seed = 0x5eed);
  AttentionOutput attend(const Tensor& query, const Tensor& keys, const Tensor& key_padding_mask, int64_t t) override;
  std::string kind() const override { return "hard"; }
  // The sample of the last attend() in training mode (undefined tensors otherwise).
  const HardSample& last_sample() const { return sample_; }
  bool eval_argmax = false;  // eval mode: context at the argmax instead of the expectation
  Generator gen;             // draws the samples (seeded; reseed with gen = Generator(s))

 private:
  HardSample sample_;
};

// Names: bahdanau, dot, general, concat, local-m, local-p, hard. graft::Error for others.
std::shared_ptr<Attention> make_attention(const std::string& name, int64_t query_dim, int64_t key_dim,
                                          int64_t attn_dim, int64_t window = 5);
const std::vector<std::string>& attention_names();

// ---- Show, Attend and Tell helpers
// The gating scalar beta = sigmoid(f_beta(h_{t-1})) [B, 1]; gated context = beta * context.
class AttentionGate : public Module {
 public:
  explicit AttentionGate(int64_t hidden_size);
  Tensor forward(const Tensor& h_prev) override;  // [B, H] -> [B, 1]
  std::string repr() const override;
  std::shared_ptr<Linear> f_beta;  // H -> 1
};

// lambda * mean_b sum_i (1 - sum_t alpha[t][b, i])^2 over the steps' weights [B, S];
// key_padding_mask (bool [B, S], true = padding, optional) leaves padded source positions out
// of the sum.
Tensor doubly_stochastic_penalty(const std::vector<Tensor>& weights_per_step, double lambda,
                                 const Tensor& key_padding_mask = {});

// REINFORCE with a moving-average baseline and an entropy bonus, for hard attention:
//   loss = -mean_b((reward_b - baseline) log_prob_b) - entropy_weight mean_b(entropy_b)
// then baseline <- decay baseline + (1 - decay) mean(reward) (the first call sets it to
// mean(reward) before use). reward [B] is treated as a constant; log_prob [B] is typically the
// sum over decoder steps of HardSample::log_prob, entropy [B] the sum of HardSample::entropy.
class Reinforce {
 public:
  explicit Reinforce(double decay = 0.9, double entropy_weight = 0.01);
  Tensor loss(const Tensor& reward, const Tensor& log_prob, const Tensor& entropy = {});
  double baseline() const { return baseline_; }
  const double decay, entropy_weight;

 private:
  double baseline_ = 0;
  bool started_ = false;
};

}  // namespace graft::nn
