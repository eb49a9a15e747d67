// Multi-output fused loops over column blocks: the engine room of the fused LSTM/GRU cells
// (autograd/ops_rnn.cpp). It extends graft::fuse (autograd/fuse.h) in two ways:
//  * several outputs, computed in order, where output m is a static expression (autograd/ct.h)
//    over the N inputs AND the outputs before it (variables N, N+1, ...): an LSTM cell is
//      c' = sigmoid(f) c + sigmoid(i) tanh(g)      (Var<0..4> = i, f, g, o, c)
//      h' = sigmoid(o) tanh(c')                     (Var<5> = c')
//    so nothing is computed twice; outputs without a destination stay in registers;
//  * operands are column blocks of row-major matrices (pointer + row stride), so the four
//    gate blocks of one [B, 4H] tensor are read in place, and their gradients are written in
//    place into one [B, 4H] buffer: no chunk views, no slice backward, no accumulation.
// The backward sweep keeps each output's ct::Tape (values cached by its forward sweep) and runs
// them in reverse: adjoint(output m) = dy_m + what later outputs pushed into variable N+m.
#pragma once
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "autograd/ct.h"

namespace graft::fuse_multi {

// A [rows, cols] block: element (b, j) at p[b * ld + j].
template <class T> struct Block {
  T* p = nullptr;
  int64_t ld = 0;
};
template <class T> struct CBlock {
  const T* p = nullptr;
  int64_t ld = 0;
};

namespace detail {

template <class V, class T> V load(const T* p) {
  if constexpr (std::is_arithmetic_v<V>) return *p;
  else return V::load_unaligned(p);
}
template <class V, class T> void store(V v, T* p) {
  if constexpr (std::is_arithmetic_v<V>) *p = v;
  else v.store_unaligned(p);
}

// One group of W (SIMD width, or 1) consecutive columns at row b, column j.
template <class V, class T, size_t N, size_t M, class... Es>
void fwd_group(const std::tuple<Es...>& es, const std::array<CBlock<T>, N>& in,
               const std::array<Block<T>, M>& out, int64_t b, int64_t j) {
  std::array<V, N + M> env;
  for (size_t k = 0; k < N; ++k) env[k] = load<V>(in[k].p + b * in[k].ld + j);
  [&]<size_t... m>(std::index_sequence<m...>) {
    ((env[N + m] = ct::eval(std::get<m>(es), env),
      out[m].p ? store<V>(env[N + m], out[m].p + b * out[m].ld + j) : void()),
     ...);
  }(std::index_sequence_for<Es...>{});
}

template <class V, class T, size_t N, size_t M, class... Es>
void bwd_group(const std::tuple<Es...>& es, const std::array<CBlock<T>, N>& in,
               const std::array<CBlock<T>, M>& dy, const std::array<Block<T>, N>& gx, int64_t b,
               int64_t j) {
  std::array<V, N + M> env, g;
  for (size_t k = 0; k < N; ++k) env[k] = load<V>(in[k].p + b * in[k].ld + j);
  for (size_t k = 0; k < N + M; ++k) g[k] = ct::splat<V>(0);
  auto tapes = [&]<size_t... m>(std::index_sequence<m...>) {
    return std::tuple<ct::Tape<Es, V>...>{ct::Tape<Es, V>(std::get<m>(es))...};
  }(std::index_sequence_for<Es...>{});
  // forward sweep: each tape caches its node values; outputs become variables N + m
  [&]<size_t... m>(std::index_sequence<m...>) {
    ((std::get<m>(tapes).fwd(env), env[N + m] = std::get<m>(tapes).v), ...);
  }(std::index_sequence_for<Es...>{});
  // reverse sweep, last output first: adj_m = dy_m + g[N + m]
  [&]<size_t... r>(std::index_sequence<r...>) {
    (
        [&] {
          constexpr size_t m = M - 1 - r;
          V adj = g[N + m];
          if (dy[m].p) adj = adj + load<V>(dy[m].p + b * dy[m].ld + j);
          std::get<m>(tapes).bwd(adj, g);
        }(),
        ...);
  }(std::make_index_sequence<M>{});
  for (size_t k = 0; k < N; ++k)
    if (gx[k].p) store<V>(g[k], gx[k].p + b * gx[k].ld + j);
}

}  // namespace detail

// For every (b, j) in [rows, cols): out[m](b, j) = E_m(in(b, j), out_0..m-1(b, j)).
// out[m].p == nullptr: output m is only an intermediate (kept in registers).
// A (the xsimd architecture) is part of the instantiation's name, so that the copies of
// autograd/rnn_loops.cpp compiled for different ISA levels never share one out-of-line body.
template <class T, size_t N, size_t M, class A = xsimd::default_arch, class... Es>
void forward(const std::tuple<Es...>& es, const std::array<CBlock<T>, N>& in,
             const std::array<Block<T>, M>& out, int64_t rows, int64_t cols) {
  static_assert(sizeof...(Es) == M, "fuse_multi::forward: one destination per expression");
  using V = xsimd::batch<T, A>;
  constexpr int64_t W = V::size;
#pragma omp parallel for if (rows * cols >= 65536)
  for (int64_t b = 0; b < rows; ++b) {
    int64_t j = 0;
    for (; j + W <= cols; j += W) detail::fwd_group<V, T, N, M>(es, in, out, b, j);
    for (; j < cols; ++j) detail::fwd_group<T, T, N, M>(es, in, out, b, j);
  }
}

// gx[k](b, j) = sum_m dy_m(b, j) d out_m / d in_k (through the later outputs too).
// dy[m].p == nullptr: no gradient arrives at output m; gx[k].p == nullptr: not needed.
template <class T, size_t N, size_t M, class A = xsimd::default_arch, class... Es>
void backward(const std::tuple<Es...>& es, const std::array<CBlock<T>, N>& in,
              const std::array<CBlock<T>, M>& dy, const std::array<Block<T>, N>& gx, int64_t rows,
              int64_t cols) {
  using V = xsimd::batch<T, A>;
  constexpr int64_t W = V::size;
#pragma omp parallel for if (rows * cols >= 32768)
  for (int64_t b = 0; b < rows; ++b) {
    int64_t j = 0;
    for (; j + W <= cols; j += W) detail::bwd_group<V, T, N, M>(es, in, dy, gx, b, j);
    for (; j < cols; ++j) detail::bwd_group<T, T, N, M>(es, in, dy, gx, b, j);
  }
}

}  // namespace graft::fuse_multi
