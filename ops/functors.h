// Elementwise math written once. Each functor has a forward `f` and a backward rule, templated
// on T so that the same text compiles for scalars (float, double) and for xsimd batches. The
// CPU kernels, the compile-time graphs (graft::ct) and the OpenCL generator all use these.
//
//   unary:  f(x, a)               forward, `a` is the op's scalar parameter (pow_scalar, ...)
//           df(x, y, dy, a)       returns dx for y = f(x): the one-line rule is in the comment
//   binary: f(x, z)               forward
//           dx(x, z, y, dy) / dz(x, z, y, dy)
#pragma once
#include <cmath>

#include <xsimd/xsimd.hpp>

namespace graft::fn {

// Branch-free select for scalars and SIMD batches alike.
template <class T> inline T sel(bool c, T a, T b) { return c ? a : b; }
template <class T, class A>
inline xsimd::batch<T, A> sel(const xsimd::batch_bool<T, A>& c, const xsimd::batch<T, A>& a,
                              const xsimd::batch<T, A>& b) {
  return xsimd::select(c, a, b);
}
template <class T> inline T vmax(T a, T b) {
  using std::max;
  using xsimd::max;
  return max(a, b);
}
template <class T> inline T vmin(T a, T b) {
  using std::min;
  using xsimd::min;
  return min(a, b);
}

#define GRAFT_FN_MATH using std::exp, std::log, std::log1p, std::sqrt, std::abs, std::tanh, \
                      std::sin, std::cos, std::erf, std::pow
// ---------------------------------------------------------------- unary
struct Neg {
  template <class T> static T f(T x, double) { return -x; }
  // dx = -dy
  template <class T> static T df(T, T, T dy, double) { return -dy; }
};
struct Exp {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return exp(x); }
  // dx = dy * y
  template <class T> static T df(T, T y, T dy, double) { return dy * y; }
};
struct Log {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return log(x); }
  // dx = dy / x
  template <class T> static T df(T x, T, T dy, double) { return dy / x; }
};
struct Sqrt {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return sqrt(x); }
  // dx = dy / (2 y)
  template <class T> static T df(T, T y, T dy, double) { return dy / (T(2) * y); }
};
struct Rsqrt {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return T(1) / sqrt(x); }
  // dx = -dy * y^3 / 2
  template <class T> static T df(T, T y, T dy, double) { return T(-0.5) * dy * y * y * y; }
};
struct Abs {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return abs(x); }
  // dx = dy * sign(x)
  template <class T> static T df(T x, T, T dy, double) {
    return sel(x > T(0), dy, sel(x < T(0), -dy, T(0)));
  }
};
struct Tanh {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return tanh(x); }
  // dx = dy * (1 - y^2)
  template <class T> static T df(T, T y, T dy, double) { return dy * (T(1) - y * y); }
};
struct Sigmoid {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return T(1) / (T(1) + exp(-x)); }
  // dx = dy * y * (1 - y)
  template <class T> static T df(T, T y, T dy, double) { return dy * y * (T(1) - y); }
};
struct Relu {
  template <class T> static T f(T x, double) { return vmax(x, T(0)); }
  // dx = dy * [x > 0]
  template <class T> static T df(T x, T, T dy, double) { return sel(x > T(0), dy, T(0)); }
};
// GELU, exact form: x * Phi(x) = x/2 * (1 + erf(x / sqrt 2))
struct Gelu {
  template <class T> static T f(T x, double) {
    GRAFT_FN_MATH;
    return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
  }
  // dx = dy * (Phi(x) + x * phi(x))
  template <class T> static T df(T x, T, T dy, double) {
    GRAFT_FN_MATH;
    T cdf = T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
    T pdf = T(0.39894228040143267794) * exp(T(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
};
// GELU, tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
struct GeluTanh {
  template <class T> static T f(T x, double) {
    GRAFT_FN_MATH;
    T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + tanh(u));
  }
  // dx = dy * (1/2 (1 + t) + x/2 (1 - t^2) u'),  t = tanh(u), u' = sqrt(2/pi)(1 + 3*0.044715 x^2)
  template <class T> static T df(T x, T, T dy, double) {
    GRAFT_FN_MATH;
    T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    T t = tanh(u);
    T du = T(0.79788456080286535588) * (T(1) + T(3 * 0.044715) * x * x);
    return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
  }
};
struct Erf {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return erf(x); }
  // dx = dy * 2/sqrt(pi) * exp(-x^2)
  template <class T> static T df(T x, T, T dy, double) {
    GRAFT_FN_MATH;
    return dy * T(1.12837916709551257390) * exp(-x * x);
  }
};
struct Sin {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return sin(x); }
  // dx = dy * cos(x)
  template <class T> static T df(T x, T, T dy, double) { GRAFT_FN_MATH; return dy * cos(x); }
};
struct Cos {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return cos(x); }
  // dx = -dy * sin(x)
  template <class T> static T df(T x, T, T dy, double) { GRAFT_FN_MATH; return -dy * sin(x); }
};
// SiLU (swish): y = x * sigmoid(x)
struct Silu {
  template <class T> static T f(T x, double) { GRAFT_FN_MATH; return x / (T(1) + exp(-x)); }
  // dx = dy * s * (1 + x (1 - s)),  s = sigmoid(x)
  template <class T> static T df(T x, T, T dy, double) {
    GRAFT_FN_MATH;
    T s = T(1) / (T(1) + exp(-x));
    return dy * s * (T(1) + x * (T(1) - s));
  }
};
// y = log(1 + e^x), and y = x where x > a (the threshold, default 20), as torch's softplus
// with beta = 1 (graft::softplus scales x by beta around this functor)
struct Softplus {
  static constexpr double default_alpha = 20.0;
  template <class T> static T f(T x, double a) {
    GRAFT_FN_MATH;
    return sel(x > T(a), x, log1p(exp(x)));
  }
  // dx = dy * sigmoid(x) = dy * e^(x - y) (dy above the threshold)
  template <class T> static T df(T x, T y, T dy, double a) {
    GRAFT_FN_MATH;
    return sel(x > T(a), dy, dy * exp(x - y));
  }
};
// y = x^a for a scalar a
struct PowScalar {
  template <class T> static T f(T x, double a) {
    GRAFT_FN_MATH;
    if (a == 2.0) return x * x;
    return pow(x, T(a));
  }
  // dx = dy * a * x^(a-1)
  template <class T> static T df(T x, T, T dy, double a) {
    GRAFT_FN_MATH;
    if (a == 2.0) return dy * T(2) * x;
    return dy * T(a) * pow(x, T(a - 1));
  }
};
// y = x + a
struct AddScalar {
  template <class T> static T f(T x, double a) { return x + T(a); }
  // dx = dy
  template <class T> static T df(T, T, T dy, double) { return dy; }
};
// y = x * a
struct MulScalar {
  template <class T> static T f(T x, double a) { return x * T(a); }
  // dx = dy * a
  template <class T> static T df(T, T, T dy, double a) { return dy * T(a); }
};

// ---------------------------------------------------------------- binary
struct Add {
  template <class T> static T f(T x, T z) { return x + z; }
  // dx = dy
  template <class T> static T dx(T, T, T, T dy) { return dy; }
  // dz = dy
  template <class T> static T dz(T, T, T, T dy) { return dy; }
};
struct Sub {
  template <class T> static T f(T x, T z) { return x - z; }
  // dx = dy
  template <class T> static T dx(T, T, T, T dy) { return dy; }
  // dz = -dy
  template <class T> static T dz(T, T, T, T dy) { return -dy; }
};
struct Mul {
  template <class T> static T f(T x, T z) { return x * z; }
  // dx = dy * z
  template <class T> static T dx(T, T z, T, T dy) { return dy * z; }
  // dz = dy * x
  template <class T> static T dz(T x, T, T, T dy) { return dy * x; }
};
struct Div {
  template <class T> static T f(T x, T z) { return x / z; }
  // dx = dy / z
  template <class T> static T dx(T, T z, T, T dy) { return dy / z; }
  // dz = -dy * x / z^2
  template <class T> static T dz(T x, T z, T, T dy) { return -dy * x / (z * z); }
};
struct Pow {
  template <class T> static T f(T x, T z) { GRAFT_FN_MATH; return pow(x, z); }
  // dx = dy * z * x^(z-1)
  template <class T> static T dx(T x, T z, T, T dy) { GRAFT_FN_MATH; return dy * z * pow(x, z - T(1)); }
  // dz = dy * y * log(x)
  template <class T> static T dz(T x, T, T y, T dy) { GRAFT_FN_MATH; return dy * y * log(x); }
};
struct Maximum {
  template <class T> static T f(T x, T z) { return vmax(x, z); }
  // dx = dy * [x >= z]  (ties go to x)
  template <class T> static T dx(T x, T z, T, T dy) { return sel(x >= z, dy, T(0)); }
  // dz = dy * [x < z]
  template <class T> static T dz(T x, T z, T, T dy) { return sel(x < z, dy, T(0)); }
};
struct Minimum {
  template <class T> static T f(T x, T z) { return vmin(x, z); }
  // dx = dy * [x <= z]  (ties go to x)
  template <class T> static T dx(T x, T z, T, T dy) { return sel(x <= z, dy, T(0)); }
  // dz = dy * [x > z]
  template <class T> static T dz(T x, T z, T, T dy) { return sel(x > z, dy, T(0)); }
};
#undef GRAFT_FN_MATH

}  // namespace graft::fn
