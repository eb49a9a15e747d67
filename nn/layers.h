// PyTorch-style layers: Linear, Embedding, Dropout, LayerNorm, Sequential and activation
// modules. Constructors take PyTorch's arguments in PyTorch's order and check them (graft::Error
// for non-positive sizes, p outside [0, 1), ...); parameters are public Tensor handles named as
// in PyTorch ("weight", "bias"), so checkpoints map one to one.
//
//   auto mlp = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 64),
//                                               std::make_shared<nn::ReLU>(),
//                                               std::make_shared<nn::Linear>(64, 2));
//   Tensor y = mlp->forward(x);   // parameters "0.weight", "0.bias", "2.weight", "2.bias"
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace graft::nn {

// y = x W^T + b: x [..., in] -> y [..., out]; W [out, in], b [out].
// Init (PyTorch's): W, b ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_ with a = sqrt(5)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;
  void reset_parameters();

  const int64_t in_features, out_features;
  Tensor weight;  // [out, in]
  Tensor bias;    // [out]; undefined when bias = false
};

// A lookup table: indices int64 [...] -> [..., dim]; weight [num, dim] ~ N(0, 1).
// The padding_idx row (negative counts from the end) starts at zero and gets no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  std::string repr() const override;
  void reset_parameters();

  const int64_t num_embeddings, embedding_dim;
  const std::optional<int64_t> padding_idx;  // normalised to [0, num)
  Tensor weight;                             // [num, dim]
};

// Zeroes elements with probability p, scales the rest by 1/(1-p); identity in eval mode.
// Draws from the global generator (graft::manual_seed).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string repr() const override;

  const double p;
};

// Normalises over the last dim C: y = (x - mean) / sqrt(var + eps) * weight + bias.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;  // x [..., C]
  std::string repr() const override;
  void reset_parameters();

  const int64_t normalized_shape;
  const double eps;
  const bool elementwise_affine;
  Tensor weight;  // [C], ones (undefined without elementwise_affine)
  Tensor bias;    // [C], zeros
};

// Chains its children: forward(x) = m_{n-1}(... m_1(m_0(x))). Children are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... M>
  explicit Sequential(std::shared_ptr<M>... modules) {
    (push_back(std::move(modules)), ...);
  }
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);

  void push_back(std::shared_ptr<Module> module);
  int64_t size() const { return int64_t(layers_.size()); }
  const std::shared_ptr<Module>& operator[](int64_t i) const;
  Tensor forward(const Tensor& x) override;
  std::string repr() const override { return "Sequential"; }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// ---- activations (no parameters)
using ReLU = FunctionModule<"ReLU", relu>;

// approximate: "none" (x Phi(x), erf form) or "tanh"
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  std::string repr() const override { return "GELU(approximate='" + approximate + "')"; }

  const std::string approximate;
};

using Tanh = FunctionModule<"Tanh", tanh>;
using Sigmoid = FunctionModule<"Sigmoid", sigmoid>;

class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string repr() const override { return "Identity()"; }
};

}  // namespace graft::nn
