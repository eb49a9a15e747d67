// The differentiable op set (the public API, PyTorch names). Every op here has one entry in the
// op table (autograd/op_table.h) with its gradcheck cases, defined in the same file as the op.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "ops/kernels.h"
#include "ops/random.h"

namespace graft {

// ---- elementwise unary (float dtypes)
// `Tensor name(const Tensor& x)` for every plain unary op listed in GRAFT_PLAIN_UNARY_OPS
// (ops/kernels.h): neg, exp, log, sqrt, rsqrt, abs, tanh, sigmoid, relu, erf, sin, cos and more
#define GRAFT_DECLARE_UNARY(name, ...) Tensor name(const Tensor& x);
GRAFT_PLAIN_UNARY_OPS(GRAFT_DECLARE_UNARY)
#undef GRAFT_DECLARE_UNARY
// approximate: "none" (erf form) or "tanh"
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor pow(const Tensor& x, double exponent);
Tensor square(const Tensor& x);
Tensor add(const Tensor& x, double s);
Tensor mul(const Tensor& x, double s);
// log(1 + exp(beta x)) / beta, and x where beta x > threshold (torch's softplus); fused for beta 1
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

// ---- elementwise binary with NumPy broadcasting
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// ---- comparisons (bool result, not differentiable) and selection
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// cond ? a : b (differentiable in a and b, not in cond)
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask is true
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions; empty dims = all dims
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);
// Index of the largest value along dim (int64, not differentiable).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
// Running sum along dim (torch.cumsum): out_i = x_0 + ... + x_i, same shape as x.
Tensor cumsum(const Tensor& x, int64_t dim);
// Sums g down to `shape` (undoes broadcasting): the backward of expand.
Tensor sum_to(const Tensor& g, const Shape& shape);

// ---- linear algebra
// a [..., M, K] @ b [..., K, N] with broadcast batch dims; 1-D operands as in torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., I] @ w[O, I]^T + bias[O]
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});

// ---- normalisation
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Normalises over the last dim (size C); gamma, beta [C] optional.
Tensor layer_norm(const Tensor& x, const Tensor& gamma = {}, const Tensor& beta = {},
                  double eps = 1e-5);
// Zeroes elements with probability p and scales the rest by 1/(1-p) (identity if !training).
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

// ---- indexing
// weight [V, C], indices int64 any shape -> [..., C]; rows equal to padding_idx get no grad.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// torch.index_select(x, dim, index, out=out): writes into out (any strides, e.g. a narrowed
// buffer), which must have the result's shape, x's dtype and device, and share no storage with
// x. Not differentiable: graft::Error if x requires grad while grad mode is on.
void index_select_out(Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

// ---- joining and splitting
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// ---- losses
enum class Reduction { none, mean, sum };
struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::mean;
  // Which dim of logits holds the classes. -1 (the default): the last, graft's layout for
  // sequence models, logits [B, T, V] with target [B, T]. 1: PyTorch's rule, logits [B, C] or
  // [B, C, d1, ...] (e.g. [B, C, T]) with target [B] or [B, d1, ...]. Any dim in [-D, D) works;
  // 1-D logits [C] are one row whatever class_dim says (as in torch).
  int64_t class_dim = -1;
};
// logits [N, V] (or [N..., V]; see class_dim for [N, V, d...]), target int64 = logits without
// the class dim; reduction none returns the target's shape; mean over non-ignored targets.
//   cross_entropy(logits_btv, target_bt);                      // class dim last
//   cross_entropy(logits_bct, target_bt, {.class_dim = 1});    // PyTorch's layout
Tensor cross_entropy(const Tensor& logits, const Tensor& target, CrossEntropyOptions opt = {});
// cross_entropy (with opt's label smoothing and reduction), and the plain mean negative
// log-likelihood of the same non-ignored targets, -mean log p(t) (what perplexity reports),
// read from the log-probabilities the loss computes anyway: one pass over the logits instead of
// a second, unsmoothed cross_entropy. nll has no gradient; it is NaN when every target is
// ignored, and inside a graft::compile trace (it would be a host read of a traced value).
//   auto [loss, nll] = cross_entropy_with_nll(logits_btv, target_bt, {.label_smoothing = 0.1});
struct CrossEntropyWithNll {
  Tensor loss;
  double nll = 0.0;
};
CrossEntropyWithNll cross_entropy_with_nll(const Tensor& logits, const Tensor& target,
                                           CrossEntropyOptions opt = {});

// ---- operators
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);

}  // namespace graft
