#include "nn/layers.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/init.h"

namespace graft::nn {

namespace {

void check_positive(int64_t v, const char* what, const char* layer) {
  GRAFT_CHECK(v > 0, "{}: {} must be positive, got {}", layer, what, v);
}

// x [..., C] with C == expected, or a clear error naming the layer (repr() only on failure).
void check_last_dim(const Tensor& x, int64_t expected, const Module& layer) {
  GRAFT_CHECK(x.defined(), "{}: the input tensor is undefined", layer.repr());
  GRAFT_CHECK(x.dim() >= 1 && x.shape().back() == expected,
              "{}: input of shape {} must end in a dim of size {}", layer.repr(), x.shape(),
              expected);
}

}  // namespace

// ------------------------------------------------------------------ Linear
Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  check_positive(in, "in_features", "Linear");
  check_positive(out, "out_features", "Linear");
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform_(a = sqrt(5)): gain sqrt(1/3), bound = gain sqrt(3 / in) = 1 / sqrt(in)
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(double(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  check_last_dim(x, in_features, *this);
  return linear(x, weight, bias);  // [..., in] -> [..., out]
}

std::string Linear::repr() const {
  return fmt::format("Linear(in_features={}, out_features={}, bias={})", in_features,
                     out_features, bias.defined());
}

// ------------------------------------------------------------------ Embedding
namespace {
std::optional<int64_t> normalise_padding(std::optional<int64_t> pad, int64_t num) {
  if (!pad) return pad;
  GRAFT_CHECK(*pad >= -num && *pad < num,
              "Embedding: padding_idx {} out of range for {} embeddings (valid {}..{})", *pad, num,
              -num, num - 1);
  return *pad < 0 ? *pad + num : *pad;
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad)
    : num_embeddings(num), embedding_dim(dim), padding_idx(normalise_padding(pad, num)) {
  check_positive(num, "num_embeddings", "Embedding");
  check_positive(dim, "embedding_dim", "Embedding");
  weight = register_parameter("weight", empty({num, dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) init::zeros_(weight.select(0, *padding_idx));
}

Tensor Embedding::forward(const Tensor& indices) {
  check_defined(indices, "Embedding");
  GRAFT_CHECK(indices.dtype() == DType::i64,
              "{}: indices must be int64, got {}; hint: convert with .to(DType::i64)", repr(),
              indices.dtype());
  return embedding(weight, indices, padding_idx);  // [...] -> [..., dim]
}

std::string Embedding::repr() const {
  std::string s = fmt::format("Embedding({}, {}", num_embeddings, embedding_dim);
  if (padding_idx) s += fmt::format(", padding_idx={}", *padding_idx);
  return s + ")";
}

// ------------------------------------------------------------------ Dropout
Dropout::Dropout(double p_) : p(p_) {
  GRAFT_CHECK(p_ >= 0.0 && p_ < 1.0, "Dropout: probability p must be in [0, 1), got {}", p_);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

std::string Dropout::repr() const { return fmt::format("Dropout(p={})", p); }

// ------------------------------------------------------------------ LayerNorm
LayerNorm::LayerNorm(int64_t C, double eps_, bool affine)
    : normalized_shape(C), eps(eps_), elementwise_affine(affine) {
  check_positive(C, "normalized_shape", "LayerNorm");
  GRAFT_CHECK(std::isfinite(eps_) && eps_ > 0, "LayerNorm: eps must be positive, got {}", eps_);
  if (affine) {
    weight = register_parameter("weight", empty({C}));
    bias = register_parameter("bias", empty({C}));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!elementwise_affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_last_dim(x, normalized_shape, *this);
  return layer_norm(x, weight, bias, eps);  // [..., C] -> [..., C]
}

std::string LayerNorm::repr() const {
  return fmt::format("LayerNorm(({},), eps={}, elementwise_affine={})", normalized_shape, eps,
                     elementwise_affine);
}

// ------------------------------------------------------------------ Sequential
Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  GRAFT_CHECK(module != nullptr, "Sequential::push_back: module {} is null", layers_.size());
  register_module(std::to_string(layers_.size()), module);
  layers_.push_back(std::move(module));
}

const std::shared_ptr<Module>& Sequential::operator[](int64_t i) const {
  GRAFT_CHECK(i >= 0 && i < size(), "Sequential: index {} out of range for {} modules", i, size());
  return layers_[size_t(i)];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& m : layers_) y = m->forward(y);
  return y;
}

// ------------------------------------------------------------------ activations
GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  GRAFT_CHECK(approximate == "none" || approximate == "tanh",
              "GELU: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
}

}  // namespace graft::nn
