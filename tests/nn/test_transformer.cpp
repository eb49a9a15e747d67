// Transformer suite: the fused attention kernel against the composite path (values and
// gradients, every mask combination, dead rows, dropout, float64 and float32) and against the
// reference kernels; gradcheck of MultiheadAttention and the encoder/decoder layers; the causal
// property; KV-cache decoding against full recomputation; positional encodings; errors; and
// tiny models that must learn (a GPT on a fixed sequence, an encoder-decoder on copy/reverse).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/attention.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "nn/attention.h"
#include "nn/transformer.h"
#include "ops/kernels.h"
#include "ops/random.h"

using namespace graft;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dt = DType::f64, bool grad = true) {
  Generator g(seed);
  return randn(s, TensorOptions(dt).requires_grad(grad), &g);
}
Tensor bools(const std::vector<int>& v, const Shape& s) {
  std::vector<double> d(v.begin(), v.end());
  return ne(from_vector(d, s, DType::f64), zeros(Shape{}, DType::f64));
}
double max_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::abs(x[i] - y[i]));
  }
  return m;
}
// a & b for bool masks (broadcasting)
Tensor both(const Tensor& a, const Tensor& b) {
  return ne(a.to(DType::f64) * b.to(DType::f64), zeros(Shape{}, DType::f64));
}
bool all_finite(const Tensor& t) {
  for (double x : t.to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

// Output and grads of q, k, v for a weighted sum of the output.
struct Run {
  Tensor out, dq, dk, dv;
};
Run run(const Tensor& q0, const Tensor& k0, const Tensor& v0, AttentionOptions o,
        AttentionImpl impl, uint64_t dropout_seed = 5) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(),
         v = v0.detach().requires_grad_();
  o.impl = impl;
  Generator gen(dropout_seed);
  o.generator = &gen;
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  Tensor w = rnd(out.shape(), 777, out.dtype(), false);
  sum(out * w).backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

void check_agree(const Run& a, const Run& b, double tol) {
  CHECK(max_diff(a.out, b.out) <= tol);
  CHECK(max_diff(a.dq, b.dq) <= tol);
  CHECK(max_diff(a.dk, b.dk) <= tol);
  CHECK(max_diff(a.dv, b.dv) <= tol);
}

struct MaskCase {
  const char* name;
  bool causal;
  int64_t offset;
  int kind;  // 0 none, 1 bool [T,S], 2 additive [T,S], 3 bool key padding [B,1,1,S], 4 both 1+3
  double dropout;
};

}  // namespace

TEST_CASE("attention: fused kernel equals the composite path for every mask combination") {
  // sizes that exercise several key blocks (S > 128), ragged row tiles (T % 4 != 0), head dims
  // that are not a multiple of the vector width, and E != D
  const int64_t B = 2, H = 2, T = 37, S = 150, D = 20, E = 12;
  const MaskCase cases[] = {
      {"none", false, 0, 0, 0.0},        {"causal", true, 0, 0, 0.0},
      {"causal offset -3", true, -3, 0, 0.0}, {"causal offset S-T", true, S - T, 0, 0.0},
      {"bool mask", false, 0, 1, 0.0},   {"additive mask + causal", true, 0, 2, 0.0},
      {"key padding", false, 0, 3, 0.0}, {"key padding + bool + causal", true, 5, 4, 0.0},
      {"dropout", false, 0, 0, 0.25},    {"dropout + padding + causal", true, 0, 3, 0.4},
  };
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-10 : 1e-5;
    Tensor q = rnd({B, H, T, D}, 1, dt), k = rnd({B, H, S, D}, 2, dt), v = rnd({B, H, S, E}, 3, dt);
    Generator mg(9);
    Tensor mb = lt(rand({T, S}, DType::f64, &mg), full(Shape{}, 0.8, DType::f64));  // ~80% attend
    Tensor madd = rnd({T, S}, 4, dt, false);
    std::vector<int> pad(size_t(B * S), 1);
    for (int64_t s = S - 40; s < S; ++s) pad[size_t(S + s)] = 0;  // batch 1: last 40 keys padded
    Tensor mpad = bools(pad, {B, 1, 1, S});
    for (const MaskCase& c : cases) {
      INFO(std::string(c.name) << " " << dtype_name(dt));
      AttentionOptions o;
      o.is_causal = c.causal;
      o.causal_offset = c.offset;
      o.dropout_p = c.dropout;
      if (c.kind == 1) o.attn_mask = mb;
      if (c.kind == 2) o.attn_mask = madd;
      if (c.kind == 3) o.attn_mask = mpad;
      if (c.kind == 4) o.attn_mask = both(mb, mpad);
      Run f = run(q, k, v, o, AttentionImpl::fused);
      Run cp = run(q, k, v, o, AttentionImpl::composite);
      check_agree(f, cp, tol);
      // the fast kernel against the scalar reference kernel
      set_use_reference_kernels(true);
      Run r = run(q, k, v, o, AttentionImpl::fused);
      set_use_reference_kernels(false);
      check_agree(f, r, tol);
    }
  }
}
