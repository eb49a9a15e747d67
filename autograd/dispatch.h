// Internal helpers for op implementations: device checks, kernel lookup, output allocation.
#pragma once
#include <initializer_list>

#include "autograd/node.h"
#include "autograd/tensor.h"
#include "ops/kernels.h"

namespace graft::detail {

// The back-end for the inputs' common device; graft::Error if devices differ or none exists.
const Backend& backend(const char* op, std::initializer_list<const Tensor*> inputs);
// Throws graft::Error unless kernel `k` exists on the device of `t`.
template <class K> K need(K k, const char* op, const Tensor& t) {
  GRAFT_CHECK(k != nullptr,
              "{}: no kernel for device {}; hint: move the inputs with .to(Device::cpu())", op,
              t.device().str());
  return k;
}
// graft::Error unless x has a floating dtype.
void check_float(const Tensor& x, const char* op);
// graft::Error unless a and b have the same dtype.
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
// graft::Error unless `input` (called `name` in the message, e.g. "logits") has a class dim and
// `target` holds int64 class indices: the checks cross_entropy and nn::nll_loss share.
void check_class_target(const Tensor& input, const Tensor& target, const char* op, const char* name);
// A view of x broadcast to `shape` (kernel-level; no autograd).
TensorView broadcast_view(const Tensor& x, const Shape& shape);
// Dims in [0, rank) from possibly negative user dims; empty means all dims.
std::vector<int> wrap_dims(const std::vector<int64_t>& dims, int rank, const char* op);

}  // namespace graft::detail
