// The loops of autograd/rnn_loops.h. This file is compiled once per ISA copy (meson.build): the
// baseline copy, in graft::rnn_loops::baseline, also holds get<T>(), which picks a copy.
#include "autograd/rnn_loops.h"

#include <cmath>
#include <string_view>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "graft_config.h"
#include "ops/kernels.h"

#ifdef GRAFT_KERNEL_ISA
#define GRAFT_RNN_LOOPS_NAMESPACE graft::rnn_loops::GRAFT_KERNEL_ISA
#else
#define GRAFT_RNN_LOOPS_NAMESPACE graft::rnn_loops::baseline
#endif

namespace GRAFT_RNN_LOOPS_NAMESPACE {
namespace {

// Forward: the gate activations are outputs too (saved for backward), so the backward pass is
// pure multiply-adds: no transcendental is evaluated twice. Variables N, N+1, ... are the
// earlier outputs (autograd/fuse_multi.h).
template <int I> constexpr ct::Var<I> v{};
// tanh(x) = 2 sigmoid(2x) - 1: one exp and one division; it cut the forward loop's time by about
// a third against the SIMD tanh in our runs. The absolute difference is at rounding level.
template <class E> auto tanh_(const E& e) { return 2.0 * sigmoid(2.0 * e) - 1.0; }

// LSTM forward: x0..x4 = i, f, g, o (pre-activations), c_prev.
auto lstm_fwd() {
  return std::make_tuple(sigmoid(v<0>),              // x5  = sigma(i)   (saved)
                         sigmoid(v<1>),              // x6  = sigma(f)   (saved)
                         tanh_(v<2>),                // x7  = tanh(g)    (saved)
                         sigmoid(v<3>),              // x8  = sigma(o)   (saved)
                         v<6> * v<4> + v<5> * v<7>,  // x9  = c = f c_prev + i g
                         tanh_(v<9>),                // x10 = tanh(c)    (saved)
                         v<8> * v<10>);              // x11 = h = o tanh(c)
}
// LSTM backward: x0..x4 = the saved i, f, g, o, tanh(c); x5 = c_prev, x6 = dh, x7 = dc.
auto lstm_bwd() {
  return std::make_tuple(v<7> + v<6> * v<3> * (1.0 - v<4> * v<4>),  // x8 = dc' = dc + dh o (1 - tanh(c)^2)
                         v<8> * v<2> * v<0> * (1.0 - v<0>),         // d i = dc' g i (1 - i)
                         v<8> * v<5> * v<1> * (1.0 - v<1>),         // d f = dc' c_prev f (1 - f)
                         v<8> * v<0> * (1.0 - v<2> * v<2>),         // d g = dc' i (1 - g^2)
                         v<6> * v<4> * v<3> * (1.0 - v<3>),         // d o = dh tanh(c) o (1 - o)
                         v<8> * v<1>);                              // d c_prev = dc' f
}
// GRU forward: x0..x2 = gi_r, gi_z, gi_n; x3..x5 = gh_r, gh_z, gh_n; x6 = h_prev.
auto gru_fwd() {
  return std::make_tuple(sigmoid(v<0> + v<3>),           // x7 = r   (saved)
                         sigmoid(v<1> + v<4>),           // x8 = z   (saved)
                         tanh_(v<2> + v<7> * v<5>),      // x9 = n   (saved)
                         v<9> + v<8> * (v<6> - v<9>));   // h = (1 - z) n + z h_prev
}
// GRU backward: x0..x2 = the saved r, z, n; x3 = gh_n, x4 = h_prev, x5 = dy.
auto gru_bwd() {
  return std::make_tuple(v<5> * (1.0 - v<1>) * (1.0 - v<2> * v<2>),    // x6 = d gi_n = dy (1 - z)(1 - n^2)
                         v<6> * v<3> * v<0> * (1.0 - v<0>),           // x7 = d gi_r = d gh_r = d gi_n gh_n r (1 - r)
                         v<5> * (v<4> - v<2>) * v<1> * (1.0 - v<1>),  // x8 = d gi_z = d gh_z = dy (h_prev - n) z (1 - z)
                         v<6> * v<0>,                                 // d gh_n = d gi_n r
                         v<5> * v<1>,                                 // d h_prev = dy z
                         v<7>,                                        // (d gh_r: a copy of x7)
                         v<8>);                                       // (d gh_z: a copy of x8)
}

// One fused loop of a plan above over B x H elements; in and out are its blocks in the plan's
// numbering (N inputs x0.., then M results).
template <class T, size_t N, size_t M, auto Plan>
void fused(const std::array<CBlock<T>, N>& in, const std::array<Block<T>, M>& out, int64_t B, int64_t H) {
  fuse_multi::forward<T, N, M>(Plan(), in, out, B, H);
}

// tanh(x) = 2 sigmoid(2x) - 1 = 2 / (1 + exp(-2x)) - 1, as in the fused cells above.
template <class V> V tanh_fast(V x) {
  if constexpr (std::is_arithmetic_v<V>) return V(2) / (V(1) + std::exp(V(-2) * x)) - V(1);
  else return V(2) / (V(1) + xsimd::exp(V(-2) * x)) - V(1);
}

// Rows s of one batch row b: t[s, :] = tanh(uh[s, :] + wq), e[s] = t[s, :] . v (t may be null).
template <class T>
void score_rows(const T* uh, const T* wq, const T* v, T* t, T* e, int64_t S, int64_t A) {
  using V = xsimd::batch<T>;
  constexpr int64_t W = int64_t(V::size);
  for (int64_t s = 0; s < S; ++s) {
    const T* u = uh + s * A;
    T* ts = t ? t + s * A : nullptr;
    V acc(T(0));
    int64_t j = 0;
    for (; j + W <= A; j += W) {
      V x = tanh_fast(V::load_unaligned(u + j) + V::load_unaligned(wq + j));
      if (ts) x.store_unaligned(ts + j);
      acc = xsimd::fma(x, V::load_unaligned(v + j), acc);
    }
    T tail = 0;
    for (; j < A; ++j) {
      T x = tanh_fast(u[j] + wq[j]);
      if (ts) ts[j] = x;
      tail += x * v[j];
    }
    e[s] = xsimd::hadd(acc) + tail;
  }
}

// Backward for one batch row b: g = de[s] v (1 - t^2); duh[s, :] = g; dwq += g over s.
template <class T>
void score_rows_bwd(const T* t, const T* de, const T* v, T* duh, T* dwq, int64_t S, int64_t A) {
  using V = xsimd::batch<T>;
  constexpr int64_t W = int64_t(V::size);
  for (int64_t j = 0; j < A; ++j) dwq[j] = 0;
  for (int64_t s = 0; s < S; ++s) {
    const T* ts = t + s * A;
    T* du = duh ? duh + s * A : nullptr;
    const V d(de[s]);
    int64_t j = 0;
    for (; j + W <= A; j += W) {
      V x = V::load_unaligned(ts + j);
      V g = d * V::load_unaligned(v + j) * (V(1) - x * x);
      if (du) g.store_unaligned(du + j);
      (V::load_unaligned(dwq + j) + g).store_unaligned(dwq + j);
    }
    for (; j < A; ++j) {
      T g = de[s] * v[j] * (T(1) - ts[j] * ts[j]);
      if (du) du[j] = g;
      dwq[j] += g;
    }
  }
}

// All B rows (parallel over b for large problems).
template <class T>
void score_forward(const T* uh, const T* wq, const T* v, T* t, T* e, int64_t B, int64_t S, int64_t A) {
#pragma omp parallel for if (B * S * A >= 65536)
  for (int64_t b = 0; b < B; ++b)
    score_rows<T>(uh + b * S * A, wq + b * A, v, t ? t + b * S * A : nullptr, e + b * S, S, A);
}
template <class T>
void score_backward(const T* t, const T* de, const T* v, T* duh, T* dwq, int64_t B, int64_t S, int64_t A) {
#pragma omp parallel for if (B * S * A >= 65536)
  for (int64_t b = 0; b < B; ++b)
    score_rows_bwd<T>(t + b * S * A, de + b * S, v, duh ? duh + b * S * A : nullptr, dwq + b * A, S, A);
}

template <class T>
constexpr Loops<T> kLoops{fused<T, 5, 7, lstm_fwd>, fused<T, 8, 6, lstm_bwd>,
                          fused<T, 7, 4, gru_fwd>,  fused<T, 6, 7, gru_bwd>,
                          score_forward<T>,         score_backward<T>};

}  // namespace

const Loops<float>& loops_f32() { return kLoops<float>; }
const Loops<double>& loops_f64() { return kLoops<double>; }

}  // namespace GRAFT_RNN_LOOPS_NAMESPACE

#ifndef GRAFT_KERNEL_ISA
namespace graft::rnn_loops {
namespace {
// Every copy's two tables, in the order of cpu_isa_available()'s names.
struct Copy {
  const char* name;
  const Loops<float>& (*f32)();
  const Loops<double>& (*f64)();
};
}  // namespace
#if GRAFT_CPU_DISPATCH
namespace avx2 {
const Loops<float>& loops_f32();
const Loops<double>& loops_f64();
}  // namespace avx2
namespace avx512 {
const Loops<float>& loops_f32();
const Loops<double>& loops_f64();
}  // namespace avx512
#endif

namespace {
const Copy& chosen() {
  static const Copy& c = []() -> const Copy& {
    static const Copy copies[] = {
        {"baseline", baseline::loops_f32, baseline::loops_f64},
#if GRAFT_CPU_DISPATCH
        {"avx2", avx2::loops_f32, avx2::loops_f64},
        {"avx512", avx512::loops_f32, avx512::loops_f64},
#endif
    };
    const std::string_view isa = cpu_isa();
    for (const Copy& k : copies)
      if (isa == k.name) return k;
    return copies[0];  // "native": the one copy is the baseline namespace
  }();
  return c;
}
}  // namespace

template <> const Loops<float>& get<float>() { return chosen().f32(); }
template <> const Loops<double>& get<double>() { return chosen().f64(); }

}  // namespace graft::rnn_loops
#endif
