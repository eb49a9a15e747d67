// Gradient clipping by global norm and by value.
#include "nn/clip.h"

#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"

namespace graft::nn {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  GRAFT_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be >= 0, got {}", max_norm);
  GRAFT_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be > 0 or INFINITY, got {}",
              norm_type);
  NoGradGuard ng;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    check_defined(p, "clip_grad_norm_");
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  const bool inf = std::isinf(norm_type);
  double acc = 0;  // max |g| (inf), else sum |g|^p over all grads
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;
    if (inf) acc = std::fmax(acc, amax(abs(g)).item<double>());  // max |g|
    else if (norm_type == 2) acc += sum(mul(g, g)).item<double>();  // sum g^2
    else if (norm_type == 1) acc += sum(abs(g)).item<double>();     // sum |g|
    else acc += sum(pow(abs(g), norm_type)).item<double>();         // sum |g|^p
    if (std::isnan(acc)) break;
  }
  const double total = inf ? acc : norm_type == 2 ? std::sqrt(acc) : std::pow(acc, 1 / norm_type);
  GRAFT_CHECK(!error_if_nonfinite || std::isfinite(total),
              "clip_grad_norm_: the total norm of order {} of the gradients is {}, so they cannot "
              "be clipped; hint: lower the learning rate or check the loss for nan/inf",
              norm_type, total);
  const double coef = max_norm / (total + 1e-6);  // g *= min(1, max_norm / (total + 1e-6))
  if (!(coef >= 1.0))
    for (Tensor g : grads) g.mul_(coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  GRAFT_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be >= 0, got {}", clip_value);
  NoGradGuard ng;
  for (const Tensor& p : params) {
    check_defined(p, "clip_grad_value_");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const TensorOptions o = g.options();
    // g = min(max(g, -c), c)
    g.copy_(minimum(maximum(g, scalar_tensor(-clip_value, o)), scalar_tensor(clip_value, o)));
  }
}

}  // namespace graft::nn
