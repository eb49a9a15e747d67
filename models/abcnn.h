// BCNN and ABCNN-1/2/3 (Yin, Schütze, Xiang and Zhou 2016, "ABCNN: Attention-Based
// Convolutional Neural Network for Modeling Sentence Pairs") for pair classification.
//
// Each sentence is a matrix of word embeddings [B, C0, S] (C0 = embed_dim, S = max_len: every
// sentence is right-padded with zero vectors to S words, as in the paper). A block is
//   (ABCNN-1/3) attention feature map: A = match_score(F0, F1) [B, S, S];
//               F0_a = W0 A^T, F1_a = W1 A  (W0, W1 [C, S] learned), stacked with F0, F1 as
//               extra input channels: [B, 2C, S];
//   wide convolution of width w (C_out = channels) and tanh: [B, channels, S + w - 1];
//   (BCNN, ABCNN-1) w-ap: average pooling of width w, stride 1 -> [B, channels, S];
//   (ABCNN-2/3)     attention-weighted w-ap: A' = match_score of the two conv outputs,
//               a0 = row sums of A', a1 = column sums; pooled column j = sum_{k=j}^{j+w-1} a_k c_k.
// One or two blocks (the second block reads the first one's pooled output).
// match_score(x, y)_ij = 1 / (1 + |x_i - y_j|), |.| the Euclidean distance between columns
// (computed as sqrt(d^2 + 1e-6), so the gradient stays finite where two columns are equal, e.g.
// two padding positions; identical columns score 1/(1 + 1e-3) instead of 1).
//
// Output layer (logistic regression or a 2-way softmax) over the features of every layer
// l = 0 (the embeddings), 1, ..., blocks: the all-ap (average over all columns) of both
// sentences' maps (for a block: of its w-ap output, so that ABCNN-2's attention-weighted pooling
// reaches the output layer even with one block), their cosine similarity and
// 1 / (1 + their Euclidean distance).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace graft::models {

enum class AbcnnVariant : int { bcnn = 0, abcnn1 = 1, abcnn2 = 2, abcnn3 = 3 };
const char* variant_name(AbcnnVariant v);  // "BCNN", "ABCNN-1", ...

struct AbcnnConfig {
  int64_t vocab_size = 0;
  int64_t embed_dim = 50;  // C0
  int64_t max_len = 20;    // S: sentences are padded or cut to S words
  int64_t width = 3;       // w: the filter width (wide convolution) and the w-ap window
  int64_t channels = 50;   // filters per block
  int64_t blocks = 1;      // 1 or 2
  AbcnnVariant variant = AbcnnVariant::bcnn;
  std::string output = "logistic";  // "logistic" (1 logit) or "softmax" (2 logits)
};

// x [B, C, S0], y [B, C, S1] -> [B, S0, S1], A_ij = 1 / (1 + |x[:, :, i] - y[:, :, j]|).
Tensor match_score(const Tensor& x, const Tensor& y);

class Abcnn : public nn::Module {
 public:
  explicit Abcnn(const AbcnnConfig& config);

  struct Output {
    Tensor logits;                   // [B] (logistic) or [B, 2] (softmax)
    std::vector<Tensor> attention;   // ABCNN-1/3, per block: the input match scores [B, S, S]
    std::vector<Tensor> conv_attention;  // per block (ABCNN-2/3): [B, S+w-1, S+w-1]
    Tensor features;                 // [B, F]: the output layer's input
  };
  // a, b int64 [B, S] word ids (0 = padding).
  Output forward_pair(const Tensor& a, const Tensor& b);
  // Mean loss against labels int64 [B] (0/1): logistic -> binary cross-entropy, softmax ->
  // cross-entropy.
  Tensor loss(const Output& out, const Tensor& label) const;
  // Predicted labels int64 [B].
  Tensor predict(const Output& out) const;
  int64_t num_features() const;
  std::string repr() const override;

  const AbcnnConfig config;
  std::shared_ptr<nn::Embedding> embed;
  std::vector<std::shared_ptr<nn::Conv1d>> convs;
  std::vector<Tensor> attn_w0, attn_w1;  // ABCNN-1/3: [C_in of block, S] per block
  std::shared_ptr<nn::Linear> out;
};

}  // namespace graft::models
