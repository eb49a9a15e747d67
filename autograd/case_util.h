// Helpers for op-table test cases (float64 inputs drawn from a generator).
#pragma once
#include <functional>

#include "autograd/functions.h"
#include "autograd/op_table.h"

namespace graft::cases {

// Uniform float64 in [lo, hi), requiring grad.
inline Tensor u(Generator& g, const Shape& s, double lo = -1.0, double hi = 1.0, bool grad = true) {
  Tensor t = uniform(s, lo, hi, DType::f64, &g);
  if (grad) t.requires_grad_(true);
  return t;
}
// Values with |x| in [0.2, 1.5) and random sign: away from kinks at 0.
inline Tensor away0(Generator& g, const Shape& s) {
  std::vector<double> v = uniform(s, 0.2, 1.5, DType::f64, &g).to_vector<double>();
  std::vector<double> sg = uniform(s, 0, 1, DType::f64, &g).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) v[i] *= sg[i] < 0.5 ? -1 : 1;
  return from_vector(v, s, TensorOptions(DType::f64).requires_grad());
}
// A non-contiguous tensor of shape s: the transpose of a [s1, s0] leaf (2-D s only).
inline Tensor transposed(Generator& g, const Shape& s, double lo = -1.0, double hi = 1.0) {
  return u(g, Shape{s[1], s[0]}, lo, hi);
}
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
inline OpCase mk(std::string label, std::vector<Tensor> in, Fn fn, bool dbl = true) {
  return OpCase{std::move(label), std::move(in), std::move(fn), dbl};
}

}  // namespace graft::cases
