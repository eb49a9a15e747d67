// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_. Parameters without a
// grad are skipped. Gradient accumulation over micro-batches needs no helper: backward() adds
// into .grad, so call it once per micro-batch (scaling each loss by 1/k) and step once.
#pragma once
#include <vector>

#include "autograd/tensor.h"

namespace graft::nn {

// Scales every grad in place by max_norm / (total + 1e-6) when that is below 1, where
// total = (sum_i ||g_i||_p^p)^(1/p) over all grads (max |g| for norm_type = INFINITY).
// Returns total, the norm before clipping (0 when no parameter has a grad). A nan/inf total
// throws graft::Error if error_if_nonfinite, else clips as PyTorch does (to zeros or nans).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every grad in place to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace graft::nn
