// The derivative rules of ops/functors.h instantiated on tensors, for the tape's backward.
//
// Each functor is a template on its value type T. With T = tfn::Val every operation in a rule
// becomes a tape op (mul, exp, where, ...), so the gradient a rule returns is itself recorded
// and differentiable: double backward (create_graph) needs no second copy of any rule. The same
// rules compile for float/double/xsimd batches in the CPU kernels and graft::ct, and for a
// symbolic type that prints OpenCL C in ops/opencl/codegen.cpp.
//
//   Val   a tensor, or a constant the rule wrote as T(c); constants stay doubles until they
//         meet a tensor (T(2) * y is mul(y, 2.0)), so a rule adds no scalar tensors of its own
//   Mask  the result of a comparison (a bool tensor), consumed by sel -> where
//   Use   a probe: runs a binary rule on bit sets to find which of x, z, y it reads, so that
//         the forward saves exactly those (add and sub save nothing)
#pragma once
#include <cmath>

#include "autograd/functions.h"
#include "ops/functors.h"
#include "ops/kernels.h"

namespace graft::tfn {

struct Val {
  Tensor t;
  double c = 0.0;
  bool is_const = true;
  Val(double v) : c(v) {}  // NOLINT: implicit, as T(0.5) in the functors
  explicit Val(Tensor x) : t(std::move(x)), is_const(false) {}
  // The value as a tensor shaped like `like` (a constant result is broadcast out).
  Tensor tensor(const Tensor& like) const {
    return is_const ? full(like.shape(), c, TensorOptions(like.dtype()).device(like.device())) : t;
  }
};
struct Mask {
  Tensor m;      // bool; undefined when both sides were constants
  Tensor like;   // a float operand of the comparison: dtype and device for constant branches
  bool c = false;
};

// A scalar tensor holding constant v, with the dtype and device of t.
inline Tensor scalar_like(double v, const Tensor& t) {
  return full(Shape{}, v, TensorOptions(t.dtype()).device(t.device()));
}

inline Val operator+(const Val& a, const Val& b) {
  if (a.is_const && b.is_const) return a.c + b.c;
  if (a.is_const) return a.c == 0.0 ? b : Val(b.t + a.c);
  if (b.is_const) return b.c == 0.0 ? a : Val(a.t + b.c);
  return Val(a.t + b.t);
}
inline Val operator-(const Val& a, const Val& b) {
  if (a.is_const && b.is_const) return a.c - b.c;
  if (a.is_const) return Val(a.c - b.t);
  if (b.is_const) return b.c == 0.0 ? a : Val(a.t - b.c);
  return Val(a.t - b.t);
}
inline Val operator*(const Val& a, const Val& b) {
  if (a.is_const && b.is_const) return a.c * b.c;
  if (a.is_const) return a.c == 1.0 ? b : Val(b.t * a.c);
  if (b.is_const) return b.c == 1.0 ? a : Val(a.t * b.c);
  return Val(a.t * b.t);
}
inline Val operator/(const Val& a, const Val& b) {
  if (a.is_const && b.is_const) return a.c / b.c;
  if (a.is_const) return Val(a.c / b.t);
  if (b.is_const) return b.c == 1.0 ? a : Val(a.t / b.c);
  return Val(a.t / b.t);
}
inline Val operator-(const Val& a) { return a.is_const ? Val(-a.c) : Val(neg(a.t)); }
inline Val& operator+=(Val& a, const Val& b) { return a = a + b; }
inline Val& operator*=(Val& a, const Val& b) { return a = a * b; }

// Comparisons: a bool tensor; a constant side becomes a scalar tensor (broadcast by compare).
template <class Cmp, class Ref>
Mask compare(const Val& a, const Val& b, Cmp cmp, Ref ref) {
  if (a.is_const && b.is_const) return Mask{Tensor(), Tensor(), ref(a.c, b.c)};
  const Tensor& like = a.is_const ? b.t : a.t;
  Tensor ta = a.is_const ? scalar_like(a.c, like) : a.t;
  Tensor tb = b.is_const ? scalar_like(b.c, like) : b.t;
  return Mask{cmp(ta, tb), like, false};
}
inline Mask operator>(const Val& a, const Val& b) {
  return compare(a, b, [](const Tensor& x, const Tensor& y) { return gt(x, y); },
                 [](double x, double y) { return x > y; });
}
inline Mask operator<(const Val& a, const Val& b) {
  return compare(a, b, [](const Tensor& x, const Tensor& y) { return lt(x, y); },
                 [](double x, double y) { return x < y; });
}
inline Mask operator>=(const Val& a, const Val& b) {
  return compare(a, b, [](const Tensor& x, const Tensor& y) { return ge(x, y); },
                 [](double x, double y) { return x >= y; });
}
inline Mask operator<=(const Val& a, const Val& b) {
  return compare(a, b, [](const Tensor& x, const Tensor& y) { return le(x, y); },
                 [](double x, double y) { return x <= y; });
}
// c ? a : b elementwise: where(), differentiable in a and b.
inline Val sel(const Mask& c, const Val& a, const Val& b) {
  if (!c.m.defined()) return c.c ? a : b;
  const Tensor& like = !a.is_const ? a.t : !b.is_const ? b.t : c.like;
  return Val(where(c.m, a.is_const ? scalar_like(a.c, like) : a.t,
                   b.is_const ? scalar_like(b.c, like) : b.t));
}

// The math functions the rules call (unqualified, found by argument-dependent lookup).
#define GRAFT_TFN_MATH(name)                                                   \
  inline Val name(const Val& x) {                                              \
    return x.is_const ? Val(std::name(x.c)) : Val(graft::name(x.t));           \
  }
GRAFT_TFN_MATH(exp) GRAFT_TFN_MATH(log) GRAFT_TFN_MATH(sqrt) GRAFT_TFN_MATH(abs)
GRAFT_TFN_MATH(tanh) GRAFT_TFN_MATH(sin) GRAFT_TFN_MATH(cos) GRAFT_TFN_MATH(erf)
#undef GRAFT_TFN_MATH
inline Val pow(const Val& x, const Val& e) {
  if (x.is_const && e.is_const) return std::pow(x.c, e.c);
  if (e.is_const) {
    if (e.c == 0.0) return 1.0;  // x^0 = 1, also where x = 0 (no 0 * inf in its derivative)
    if (e.c == 1.0) return x;
    return Val(graft::pow(x.t, e.c));
  }
  return Val(graft::pow(x.is_const ? scalar_like(x.c, e.t) : x.t, e.t));
}
inline Val max(const Val& a, const Val& b) { return sel(a < b, b, a); }  // std::max semantics
inline Val min(const Val& a, const Val& b) { return sel(b < a, b, a); }  // std::min semantics

// ---------------------------------------------------------------- the probe
struct Use {
  unsigned m = 0;
  Use(double) {}  // NOLINT: implicit, as T(0.5) in the functors; a constant reads nothing
  explicit Use(unsigned bits, int) : m(bits) {}
};
struct UseMask {
  unsigned m = 0;
};
inline Use join(unsigned m) { return Use(m, 0); }
inline Use operator+(const Use& a, const Use& b) { return join(a.m | b.m); }
inline Use operator-(const Use& a, const Use& b) { return join(a.m | b.m); }
inline Use operator*(const Use& a, const Use& b) { return join(a.m | b.m); }
inline Use operator/(const Use& a, const Use& b) { return join(a.m | b.m); }
inline Use operator-(const Use& a) { return a; }
inline UseMask operator>(const Use& a, const Use& b) { return {a.m | b.m}; }
inline UseMask operator<(const Use& a, const Use& b) { return {a.m | b.m}; }
inline UseMask operator>=(const Use& a, const Use& b) { return {a.m | b.m}; }
inline UseMask operator<=(const Use& a, const Use& b) { return {a.m | b.m}; }
inline Use sel(const UseMask& c, const Use& a, const Use& b) { return join(c.m | a.m | b.m); }
#define GRAFT_TFN_USE(name) \
  inline Use name(const Use& x) { return x; }
GRAFT_TFN_USE(exp) GRAFT_TFN_USE(log) GRAFT_TFN_USE(sqrt) GRAFT_TFN_USE(abs)
GRAFT_TFN_USE(tanh) GRAFT_TFN_USE(sin) GRAFT_TFN_USE(cos) GRAFT_TFN_USE(erf)
#undef GRAFT_TFN_USE
inline Use pow(const Use& a, const Use& b) { return join(a.m | b.m); }
inline Use max(const Use& a, const Use& b) { return join(a.m | b.m); }
inline Use min(const Use& a, const Use& b) { return join(a.m | b.m); }

// ---------------------------------------------------------------- the rules on tensors
enum : unsigned { kUseX = 1, kUseZ = 2, kUseY = 4 };

// dx = F'(x) dy for y = F(x; a), recorded on the tape (the rule is F::df).
inline Tensor unary_df(UnaryOp op, double a, const Tensor& x, const Tensor& y, const Tensor& dy) {
  switch (op) {
#define GRAFT_TFN_CASE(name, F, ...) \
  case UnaryOp::name: return fn::F::df(Val(x), Val(y), Val(dy), a).tensor(dy);
    GRAFT_UNARY_OPS(GRAFT_TFN_CASE)
#undef GRAFT_TFN_CASE
  }
  GRAFT_ASSERT(false);
}

// Which of x, z and y the two rules of a binary op read (kUseX | kUseZ | kUseY bits).
inline unsigned binary_uses(BinaryOp op) {
  const Use x(kUseX, 0), z(kUseZ, 0), y(kUseY, 0), dy(0u, 0);
  switch (op) {
#define GRAFT_TFN_CASE(name, F) \
  case BinaryOp::name: return fn::F::dx(x, z, y, dy).m | fn::F::dz(x, z, y, dy).m;
    GRAFT_BINARY_OPS(GRAFT_TFN_CASE)
#undef GRAFT_TFN_CASE
  }
  GRAFT_ASSERT(false);
}

// dx = dF/dx dy (wrt_x) or dz = dF/dz dy for y = F(x, z), at dy's (broadcast) shape. Tensors
// the op's rules do not read (binary_uses) may be undefined.
inline Tensor binary_d(BinaryOp op, bool wrt_x, const Tensor& x, const Tensor& z, const Tensor& y,
                       const Tensor& dy) {
  auto v = [](const Tensor& t) { return t.defined() ? Val(t) : Val(std::nan("")); };
  switch (op) {
#define GRAFT_TFN_CASE(name, F)                                                   \
  case BinaryOp::name:                                                            \
    return (wrt_x ? fn::F::dx(v(x), v(z), v(y), Val(dy)) : fn::F::dz(v(x), v(z), v(y), Val(dy))) \
        .tensor(dy);
    GRAFT_BINARY_OPS(GRAFT_TFN_CASE)
#undef GRAFT_TFN_CASE
  }
  GRAFT_ASSERT(false);
}

}  // namespace graft::tfn
