// BCNN / ABCNN-1/2/3 (see models/abcnn.h). Shapes: B batch, C channels, S sentence length
// (padded), w filter width.
#include "models/abcnn.h"

#include <cmath>

#include "autograd/conv.h"
#include "autograd/grad_mode.h"
#include "nn/init.h"
#include "nn/loss.h"

namespace graft::models {

const char* variant_name(AbcnnVariant v) {
  switch (v) {
    case AbcnnVariant::bcnn: return "BCNN";
    case AbcnnVariant::abcnn1: return "ABCNN-1";
    case AbcnnVariant::abcnn2: return "ABCNN-2";
    case AbcnnVariant::abcnn3: return "ABCNN-3";
  }
  return "?";
}

Tensor match_score(const Tensor& x, const Tensor& y) {
  check_defined(x, "match_score");
  check_defined(y, "match_score");
  GRAFT_CHECK(x.dim() == 3 && y.dim() == 3 && x.shape()[0] == y.shape()[0] &&
                  x.shape()[1] == y.shape()[1],
              "match_score: expected x [B, C, S0] and y [B, C, S1], got {} and {}", x.shape(),
              y.shape());
  // d2[b, i, j] = |x_i|^2 + |y_j|^2 - 2 x_i . y_j (one batched matmul instead of a
  // [B, C, S0, S1] difference tensor); relu clips the tiny negatives that rounding leaves.
  Tensor xx = sum(x * x, {1}).unsqueeze(2);                        // [B, S0, 1]
  Tensor yy = sum(y * y, {1}).unsqueeze(1);                        // [B, 1, S1]
  Tensor d2 = relu(xx + yy - 2.0 * matmul(x.transpose(1, 2), y));  // [B, S0, S1]
  return 1.0 / (1.0 + sqrt(d2 + 1e-6));                            // 1 / (1 + |x_i - y_j|)
}

namespace {
bool input_attention(AbcnnVariant v) { return v == AbcnnVariant::abcnn1 || v == AbcnnVariant::abcnn3; }
bool pool_attention(AbcnnVariant v) { return v == AbcnnVariant::abcnn2 || v == AbcnnVariant::abcnn3; }

// Cosine similarity and 1 / (1 + Euclidean distance) of the rows of f0, f1 [B, C] -> [B, 2].
Tensor similarity_features(const Tensor& f0, const Tensor& f1) {
  Tensor dot = sum(f0 * f1, {1}, true);
  Tensor n0 = sqrt(sum(f0 * f0, {1}, true) + 1e-8), n1 = sqrt(sum(f1 * f1, {1}, true) + 1e-8);
  Tensor diff = f0 - f1;
  Tensor euc = 1.0 / (1.0 + sqrt(sum(diff * diff, {1}, true) + 1e-6));
  return cat({dot / (n0 * n1), euc}, 1);
}
}  // namespace

Abcnn::Abcnn(const AbcnnConfig& c) : config(c) {
  GRAFT_CHECK(c.vocab_size >= 2, "Abcnn: vocab_size must be >= 2 (padding and unknown), got {}",
              c.vocab_size);
  GRAFT_CHECK(c.embed_dim >= 1 && c.channels >= 1 && c.width >= 1 && c.max_len >= 1,
              "Abcnn: embed_dim {}, channels {}, width {}, max_len {} must all be >= 1",
              c.embed_dim, c.channels, c.width, c.max_len);
  GRAFT_CHECK(c.blocks == 1 || c.blocks == 2, "Abcnn: blocks must be 1 or 2, got {}", c.blocks);
  GRAFT_CHECK(int(c.variant) >= 0 && int(c.variant) <= 3, "Abcnn: variant must be 0-3, got {}",
              int(c.variant));
  GRAFT_CHECK(c.output == "logistic" || c.output == "softmax",
              "Abcnn: output must be \"logistic\" or \"softmax\", got \"{}\"", c.output);
  embed = register_module("embed", std::make_shared<nn::Embedding>(c.vocab_size, c.embed_dim, 0));
  {  // N(0, 1) word vectors are large next to the rest; start them at the conv's scale
    NoGradGuard ng;
    embed->weight.mul_(0.3);
  }
  int64_t cin = c.embed_dim;
  for (int64_t k = 0; k < c.blocks; ++k) {
    const bool att = input_attention(c.variant);
    if (att) {
      Tensor w0 = empty({cin, c.max_len}), w1 = empty({cin, c.max_len});
      nn::init::xavier_uniform_(w0);
      nn::init::xavier_uniform_(w1);
      attn_w0.push_back(register_parameter(fmt::format("attn_w0_{}", k), w0));
      attn_w1.push_back(register_parameter(fmt::format("attn_w1_{}", k), w1));
    }
    convs.push_back(register_module(
        fmt::format("conv{}", k),
        std::make_shared<nn::Conv1d>(att ? 2 * cin : cin, c.channels, c.width,
                                     nn::Conv1dOptions{.padding = "wide"})));
    cin = c.channels;
  }
  out = register_module("out", std::make_shared<nn::Linear>(num_features(),
                                                            c.output == "logistic" ? 1 : 2));
}

int64_t Abcnn::num_features() const {
  // layer 0: 2 C0 + 2; every block: 2 channels + 2
  return 2 * config.embed_dim + 2 + config.blocks * (2 * config.channels + 2);
}

Abcnn::Output Abcnn::forward_pair(const Tensor& a, const Tensor& b) {
  const int64_t S = config.max_len, w = config.width;
  for (const Tensor* t : {&a, &b}) {
    check_defined(*t, "Abcnn");
    GRAFT_CHECK(t->dim() == 2 && t->dtype() == DType::i64 && t->shape()[1] == S,
                "Abcnn: word ids must be int64 [B, {}] (max_len), got {} {}", S, t->dtype(),
                t->shape());
  }
  GRAFT_CHECK(a.shape()[0] == b.shape()[0], "Abcnn: batch sizes differ: {} vs {}", a.shape()[0],
              b.shape()[0]);
  Output o;
  Tensor f0 = embed->forward(a).transpose(1, 2);  // [B, C0, S]
  Tensor f1 = embed->forward(b).transpose(1, 2);
  std::vector<Tensor> feats;
  auto add_layer = [&](const Tensor& m0, const Tensor& m1) {
    Tensor p0 = global_avg_pool1d(m0), p1 = global_avg_pool1d(m1);  // all-ap: [B, C]
    feats.push_back(p0);
    feats.push_back(p1);
    feats.push_back(similarity_features(p0, p1));
  };
  add_layer(f0, f1);
  for (int64_t k = 0; k < config.blocks; ++k) {
    Tensor x0 = f0, x1 = f1;
    if (input_attention(config.variant)) {
      Tensor A = match_score(f0, f1);  // [B, S, S]
      o.attention.push_back(A);
      // F0_a = W0 A^T [B, C, S], F1_a = W1 A [B, C, S]: the attention feature maps
      x0 = cat({f0, matmul(attn_w0[size_t(k)], A.transpose(1, 2))}, 1);
      x1 = cat({f1, matmul(attn_w1[size_t(k)], A)}, 1);
    }
    Tensor c0 = tanh(convs[size_t(k)]->forward(x0));  // [B, channels, S + w - 1]
    Tensor c1 = tanh(convs[size_t(k)]->forward(x1));
    if (pool_attention(config.variant)) {
      Tensor A2 = match_score(c0, c1);            // [B, S+w-1, S+w-1]
      o.conv_attention.push_back(A2);
      Tensor a0 = sum(A2, {2}).unsqueeze(1);      // [B, 1, S+w-1]: row sums
      Tensor a1 = sum(A2, {1}).unsqueeze(1);      // column sums
      // attention-weighted w-ap: sum of w weighted columns = w * mean
      f0 = avg_pool1d(c0 * a0, w, 1) * double(w);  // [B, channels, S]
      f1 = avg_pool1d(c1 * a1, w, 1) * double(w);
    } else {
      f0 = avg_pool1d(c0, w, 1);  // w-ap: [B, channels, S]
      f1 = avg_pool1d(c1, w, 1);
    }
    add_layer(f0, f1);  // all-ap of the block's (attention-weighted, for ABCNN-2/3) w-ap output
  }
  o.features = cat(feats, 1);  // [B, F]
  Tensor z = out->forward(o.features);
  o.logits = config.output == "logistic" ? z.squeeze(1) : z;
  return o;
}

Tensor Abcnn::loss(const Output& o, const Tensor& label) const {
  check_defined(label, "Abcnn::loss");
  GRAFT_CHECK(label.dtype() == DType::i64 && label.dim() == 1 &&
                  label.shape()[0] == o.logits.shape()[0],
              "Abcnn::loss: labels must be int64 [{}], got {} {}", o.logits.shape()[0],
              label.dtype(), label.shape());
  if (config.output == "logistic")
    return nn::binary_cross_entropy_with_logits(o.logits, label.to(o.logits.dtype()));
  return cross_entropy(o.logits, label);
}

Tensor Abcnn::predict(const Output& o) const {
  if (config.output == "logistic") return gt(o.logits, zeros({1}, TensorOptions(o.logits.dtype()))).to(DType::i64);
  return argmax(o.logits, 1);
}

std::string Abcnn::repr() const {
  return fmt::format("Abcnn({}, blocks={}, embed_dim={}, channels={}, width={}, max_len={}, "
                     "output={})", variant_name(config.variant), config.blocks, config.embed_dim,
                     config.channels, config.width, config.max_len, config.output);
}

}  // namespace graft::models
