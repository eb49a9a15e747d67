// Fused optimizer steps: Adam / AdamW, SGD (momentum, dampening, Nesterov), Adagrad.
//
// graft::cpu (fast): one pass over contiguous buffers that reads every operand once and writes
// the updated ones back in place — for Adam on float32, 16 bytes read (param, grad, m, v) and 12
// written (param, m, v) per parameter, the least traffic the update allows; a chain of tensor
// ops (PyTorch's for-loop path) would move several times that. Each update rule is written once
// as a template on the value type V and runs on xsimd batches for the body of the range and on
// scalars for its tail; tensors of kParallelGrain elements or more split into one chunk per
// OpenMP thread.
//
// graft::cpu::ref (reference): the same rules as plain scalar loops, in the order PyTorch's
// single-tensor implementation applies them (torch.optim.Adam/AdamW/SGD/Adagrad).
//
// Scalars arrive as double and are cast to the parameter's type once, as PyTorch casts Python
// scalars, so float32 parameters update in float32 arithmetic. Every a*b+c is an explicit fused
// multiply-add in both versions, so the compiler has nothing left to contract differently: with
// FMA hardware the fast and reference kernels agree bit for bit.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positives in AVX-512 headers

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "ops/cpu/cpu_kernels.h"

namespace GRAFT_CPU_NAMESPACE {
namespace {

template <class T> using Batch = xsimd::batch<T>;

// a * b + c, rounded once, for scalars and batches alike. (xsimd 8 has no AVX-512 fma kernel:
// its generic fallback is a multiply and an add, which the compiler may or may not fuse.)
template <class V> V fmadd(const V& a, const V& b, const V& c) {
  if constexpr (std::is_arithmetic_v<V>) return std::fma(a, b, c);
#if XSIMD_WITH_AVX512F
  else if constexpr (std::is_same_v<V, Batch<float>> && sizeof(V) == 64)
    return V(_mm512_fmadd_ps(a, b, c));
  else if constexpr (std::is_same_v<V, Batch<double>> && sizeof(V) == 64)
    return V(_mm512_fmadd_pd(a, b, c));
#endif
  else return xsimd::fma(a, b, c);
}

// Unaligned load/store of a batch, or plain access for a scalar. (Not called load/store: with
// a batch argument, argument-dependent lookup would prefer xsimd::store, an aligned store.)
template <class V, class T> V load_v(const T* p) {
  if constexpr (std::is_same_v<V, T>) return *p;
  else return V::load_unaligned(p);
}
template <class V, class T> void store_v(T* p, const V& v) {
  if constexpr (std::is_same_v<V, T>) *p = v;
  else v.store_unaligned(p);
}

// Calls u.at<V>(i) for i in [0, n): full SIMD batches, then scalars for the tail. Big ranges
// split into one chunk per thread (multiples of 64 elements: threads never share a cache line).
template <class T, class U> void for_range(int64_t n, const U& u) {
  const auto run = [&u](int64_t b, int64_t e) {
    constexpr int64_t W = Batch<T>::size;
    int64_t i = b;
    for (; i + 2 * W <= e; i += 2 * W) {  // two batches per trip: more loads in flight
      u.template at<Batch<T>>(i);
      u.template at<Batch<T>>(i + W);
    }
    for (; i + W <= e; i += W) u.template at<Batch<T>>(i);
    for (; i < e; ++i) u.template at<T>(i);
  };
  if (n < kParallelGrain) {
    run(0, n);
    return;
  }
  const int parts = omp_get_max_threads();
  int64_t per = (n + parts - 1) / parts;
  per = (per + 63) / 64 * 64;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < parts; ++t) {
    const int64_t b = std::min(n, per * t), e = std::min(n, b + per);
    if (b < e) run(b, e);
  }
}

// Every view contiguous, with param's dtype and numel (views with data == nullptr are skipped).
void check_views(const char* op, const TensorView& param,
                 std::initializer_list<const TensorView*> others) {
  GRAFT_CHECK(param.is_contiguous(), "{}: param must be contiguous", op);
  for (const TensorView* v : others) {
    if (v->data == nullptr) continue;
    GRAFT_CHECK(v->is_contiguous() && v->dtype == param.dtype && v->numel() == param.numel(),
                "{}: every operand must be contiguous with the param's dtype ({}) and numel ({}); "
                "got dtype {}, shape {}",
                op, param.dtype, param.numel(), v->dtype, v->shape.str());
  }
}

template <class T> struct AdamRule {
  T *p, *m, *v;
  const T* g;
  T decay, wd, w1, b2, w2, bc2_sqrt, eps, neg_step;
  bool decoupled;
  template <class V> void at(int64_t i) const {
    using std::sqrt, xsimd::sqrt;
    V P = load_v<V>(p + i), G = load_v<V>(g + i), M = load_v<V>(m + i), S = load_v<V>(v + i);
    if (decoupled) P = P * V(decay);                // p = p (1 - lr wd)             (AdamW)
    else if (wd != T(0)) G = fmadd(V(wd), P, G);    // g = g + wd p                  (Adam, L2)
    M = fmadd(V(w1), G - M, M);                     // m = b1 m + (1 - b1) g  (as m + (1-b1)(g-m))
    S = fmadd(V(w2), G * G, S * V(b2));             // v = b2 v + (1 - b2) g^2
    // p = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
    P = fmadd(V(neg_step), M / (sqrt(S) / V(bc2_sqrt) + V(eps)), P);
    store_v(p + i, P);
    store_v(m + i, M);
    store_v(v + i, S);
  }
};

template <class T> struct SgdRule {
  T *p, *b;
  const T* g;
  T wd, mom, damp1, neg_lr;
  bool momentum, nesterov, first;
  template <class V> void at(int64_t i) const {
    V P = load_v<V>(p + i), D = load_v<V>(g + i);
    if (wd != T(0)) D = fmadd(V(wd), P, D);         // d = g + wd p
    if (momentum) {
      // buf = mom buf + (1 - dampening) d   (buf = d at the first step)
      const V B = first ? D : fmadd(V(damp1), D, load_v<V>(b + i) * V(mom));
      store_v(b + i, B);
      D = nesterov ? fmadd(V(mom), B, D) : B;       // d = d + mom buf (Nesterov), else d = buf
    }
    P = fmadd(V(neg_lr), D, P);                     // p = p - lr d
    store_v(p + i, P);
  }
};

template <class T> struct AdagradRule {
  T *p, *s;
  const T* g;
  T wd, eps, neg_lr;
  template <class V> void at(int64_t i) const {
    using std::sqrt, xsimd::sqrt;
    V P = load_v<V>(p + i), G = load_v<V>(g + i), S = load_v<V>(s + i);
    if (wd != T(0)) G = fmadd(V(wd), P, G);         // g = g + wd p
    S = fmadd(G, G, S);                             // sum = sum + g^2
    P = fmadd(V(neg_lr), G / (sqrt(S) + V(eps)), P);  // p = p - clr g / (sqrt(sum) + eps)
    store_v(p + i, P);
    store_v(s + i, S);
  }
};

}  // namespace

void adam_step(const TensorView& param, const TensorView& grad, const TensorView& m,
               const TensorView& v, const AdamStepArgs& a) {
  check_views("adam_step", param, {&grad, &m, &v});
  GRAFT_DISPATCH_FLOAT(param.dtype, "adam_step", T, [&] {
    const AdamRule<T> r{param.ptr<T>(), m.ptr<T>(), v.ptr<T>(), grad.ptr<T>(),
                        T(1 - a.lr * a.weight_decay), T(a.weight_decay), T(1 - a.beta1),
                        T(a.beta2), T(1 - a.beta2), T(std::sqrt(a.bias_correction2)), T(a.eps),
                        T(-(a.lr / a.bias_correction1)), a.decoupled};
    for_range<T>(param.numel(), r);
  });
}

void sgd_step(const TensorView& param, const TensorView& grad, const TensorView& buf,
              const SgdStepArgs& a) {
  check_views("sgd_step", param, {&grad, &buf});
  GRAFT_CHECK(a.momentum == 0 || buf.data, "sgd_step: momentum {} needs a buffer", a.momentum);
  GRAFT_DISPATCH_FLOAT(param.dtype, "sgd_step", T, [&] {
    const SgdRule<T> r{param.ptr<T>(), buf.ptr<T>(), grad.ptr<T>(), T(a.weight_decay),
                       T(a.momentum), T(1 - a.dampening), T(-a.lr), a.momentum != 0,
                       a.nesterov, a.first_step};
    for_range<T>(param.numel(), r);
  });
}

void adagrad_step(const TensorView& param, const TensorView& grad, const TensorView& sum,
                  const AdagradStepArgs& a) {
  check_views("adagrad_step", param, {&grad, &sum});
  GRAFT_DISPATCH_FLOAT(param.dtype, "adagrad_step", T, [&] {
    const AdagradRule<T> r{param.ptr<T>(), sum.ptr<T>(), grad.ptr<T>(), T(a.weight_decay),
                           T(a.eps), T(-a.lr)};
    for_range<T>(param.numel(), r);
  });
}

// ------------------------------------------------------------------ scalar reference
namespace ref {

void adam_step(const TensorView& param, const TensorView& grad, const TensorView& m,
               const TensorView& v, const AdamStepArgs& a) {
  check_views("adam_step", param, {&grad, &m, &v});
  GRAFT_DISPATCH_FLOAT(param.dtype, "adam_step", T, [&] {
    T *p = param.ptr<T>(), *mp = m.ptr<T>(), *vp = v.ptr<T>();
    const T* gp = grad.ptr<T>();
    const T step_size = T(a.lr / a.bias_correction1), bc2_sqrt = T(std::sqrt(a.bias_correction2));
    for (int64_t i = 0; i < param.numel(); ++i) {
      T g = gp[i];
      if (a.decoupled) p[i] *= T(1 - a.lr * a.weight_decay);                // p *= 1 - lr wd
      else if (a.weight_decay != 0) g = std::fma(T(a.weight_decay), p[i], g); // g += wd p
      mp[i] = std::fma(T(1 - a.beta1), g - mp[i], mp[i]);       // m = m + (1 - b1)(g - m)
      vp[i] = std::fma(T(1 - a.beta2), g * g, vp[i] * T(a.beta2));  // v = b2 v + (1 - b2) g^2
      const T denom = std::sqrt(vp[i]) / bc2_sqrt + T(a.eps);   // sqrt(v) / sqrt(bc2) + eps
      p[i] = std::fma(-step_size, mp[i] / denom, p[i]);         // p -= lr / bc1 * m / denom
    }
  });
}

void sgd_step(const TensorView& param, const TensorView& grad, const TensorView& buf,
              const SgdStepArgs& a) {
  check_views("sgd_step", param, {&grad, &buf});
  GRAFT_CHECK(a.momentum == 0 || buf.data, "sgd_step: momentum {} needs a buffer", a.momentum);
  GRAFT_DISPATCH_FLOAT(param.dtype, "sgd_step", T, [&] {
    T *p = param.ptr<T>(), *b = buf.ptr<T>();
    const T* gp = grad.ptr<T>();
    for (int64_t i = 0; i < param.numel(); ++i) {
      T d = gp[i];
      if (a.weight_decay != 0) d = std::fma(T(a.weight_decay), p[i], d);  // d = g + wd p
      if (a.momentum != 0) {
        if (a.first_step) b[i] = d;                                        // buf = d
        else b[i] = std::fma(T(1 - a.dampening), d, b[i] * T(a.momentum)); // mom buf + (1-damp) d
        d = a.nesterov ? std::fma(T(a.momentum), b[i], d) : b[i];          // d + mom buf | buf
      }
      p[i] = std::fma(T(-a.lr), d, p[i]);                                  // p -= lr d
    }
  });
}

void adagrad_step(const TensorView& param, const TensorView& grad, const TensorView& sum,
                  const AdagradStepArgs& a) {
  check_views("adagrad_step", param, {&grad, &sum});
  GRAFT_DISPATCH_FLOAT(param.dtype, "adagrad_step", T, [&] {
    T *p = param.ptr<T>(), *s = sum.ptr<T>();
    const T* gp = grad.ptr<T>();
    for (int64_t i = 0; i < param.numel(); ++i) {
      T g = gp[i];
      if (a.weight_decay != 0) g = std::fma(T(a.weight_decay), p[i], g);  // g = g + wd p
      s[i] = std::fma(g, g, s[i]);                                         // sum += g^2
      p[i] = std::fma(T(-a.lr), g / (std::sqrt(s[i]) + T(a.eps)), p[i]);   // p -= clr g / (sqrt(sum) + eps)
    }
  });
}

}  // namespace ref
}  // namespace graft::cpu
