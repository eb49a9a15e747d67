// Shared by tests/nn/test_optim.cpp and test_optim_state.cpp: deterministic parameter values
// and grads, and the closeness checks of the hand-computed references.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numbers>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/clip.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "ops/cpu/cpu_kernels.h"

namespace optim_test {

using namespace graft;


using Vec = std::vector<double>;
constexpr int kN = 37;  // covers full SIMD batches and a scalar tail for float and double

// Deterministic values of both signs and varied magnitudes (wave(n, 0)[0] == 0).
inline Vec wave(int n, double phase, double scale = 1.0) {
  Vec v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * std::sin(0.37 * i + phase) * (1 + 0.05 * i);
  return v;
}
// `v` rounded to `dt` (so a double reference sees the same inputs as a float32 run).
inline Vec rounded(Vec v, DType dt) {
  if (dt == DType::f32)
    for (double& x : v) x = double(float(x));
  return v;
}
inline Tensor param(const Vec& v, DType dt = DType::f64) {
  Tensor t = from_vector(v, {int64_t(v.size())}, dt);
  t.requires_grad_();
  return t;
}
inline void set_grad(const Tensor& p, const Vec& g) {
  Tensor h = p;
  h.set_grad(from_vector(g, p.shape(), p.dtype()));
}
inline Vec vals(const Tensor& t) { return t.to_vector<double>(); }

// |a - b| <= atol + rtol |b| everywhere (one assertion, naming the worst element).
inline void check_close(const Vec& a, const Vec& b, double atol, double rtol) {
  REQUIRE(a.size() == b.size());
  size_t worst = 0;
  double worst_r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double r = std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i]));
    if (!(r <= worst_r)) worst = i, worst_r = r;  // NaN counts as worst
  }
  INFO("worst element " << worst << ": " << a[worst] << " vs " << b[worst]);
  CHECK(worst_r <= 1.0);
}
inline void check_same(const Tensor& a, const Tensor& b) {  // bit-identical values
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  CHECK(vals(a) == vals(b));
}

}  // namespace optim_test
