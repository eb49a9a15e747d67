// Loss functions (functional) and their module wrappers, like torch.nn.functional and
// torch.nn's *Loss classes. All are composed of differentiable ops, so gradients (and second
// derivatives) come from autograd. Class dims are last, as in graft::cross_entropy; for
// PyTorch's layout (classes at dim 1: [B, C, T]) give CrossEntropyLoss class_dim = 1.
//
//   nn::CrossEntropyLoss ce({.ignore_index = 0, .label_smoothing = 0.1});
//   Tensor loss = ce(logits, target);   // logits [N, V], target int64 [N]
//   nn::CrossEntropyLoss torch_ce({.class_dim = 1});
//   Tensor l2 = torch_ce(logits_bct, target_bt);  // logits [B, C, T], target int64 [B, T]
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/functions.h"
#include "nn/module.h"

namespace graft::nn {

// ---- functional
// Negative log-likelihood of log-probabilities: logp [N, V] (or [N..., V]), target int64 [N]
// (or [N...]). loss[n] = -logp[n, target[n]], 0 where target == ignore_index; mean averages
// over the rows that are not ignored (NaN when all are, like torch).
Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index = -100,
                Reduction reduction = Reduction::mean);
// (input - target)^2, same shapes and dtypes.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
// Binary cross-entropy of logits x against targets y in [0, 1] (same shape and dtype):
//   loss = (1 - y) x + w softplus(-x),  w = 1 + (pos_weight - 1) y   (pos_weight optional)
// which equals max(x, 0) - x y + log(1 + exp(-|x|)) without pos_weight; softplus is computed as
// logsumexp([0, x]) so that it is stable and its gradient (sigmoid) is exact at x = 0 too.
// pos_weight (e.g. [C] for x [N, C]) broadcasts against x.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::mean,
                                        const Tensor& pos_weight = {});

// ---- modules: forward(input, target)
class Loss : public Module {
 public:
  using Module::forward;  // the one-tensor forward() throws: losses need a target
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
};

// Wraps graft::cross_entropy (logits [N, V] or [N..., V], target int64; class_dim = 1:
// [N, C, d...]).
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string repr() const override;
  const CrossEntropyOptions options;
};

struct NLLLossOptions {
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::mean;
};
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(NLLLossOptions options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string repr() const override;
  const NLLLossOptions options;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::mean);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string repr() const override;
  const Reduction reduction;
};

struct BCEWithLogitsOptions {
  Reduction reduction = Reduction::mean;
  Tensor pos_weight;  // optional; kept as the buffer "pos_weight" (moves with to())
};
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(BCEWithLogitsOptions options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string repr() const override;
  const Reduction reduction;
  Tensor pos_weight;
};

// A classifier's training step for graft::compile (a StepFunction, autograd/compile.h):
// in = {x, target}; zeroes the parameters' grads in place (those that exist), then
// cross_entropy(model.forward(x), target).backward(); returns {loss}. The optimizer update
// stays outside. `model` must outlive the step.
std::function<std::vector<Tensor>(const std::vector<Tensor>&)> cross_entropy_step(Module& model);

}  // namespace graft::nn
