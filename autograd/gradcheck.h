// gradcheck: compares analytical gradients (backward) with central finite differences in
// float64, like torch.autograd.gradcheck. gradgradcheck does the same for the gradient itself
// (double backward through create_graph).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace graft {

struct GradcheckResult {
  bool ok = true;
  std::string message;  // first mismatch: input, element, analytical vs numerical
  double max_abs_err = 0;
  explicit operator bool() const { return ok; }
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks d fn(inputs) / d input for every input with requires_grad (must be float64) using a
// random projection of the output, element by element. Passes when
// |analytical - numerical| <= atol + rtol * |numerical| everywhere.
GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-3);
// Checks second derivatives: gradcheck of (inputs) -> sum(grad(fn)(inputs) * v).
GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                              double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);

}  // namespace graft
