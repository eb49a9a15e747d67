// The fused recurrent loops on raw column blocks: LSTM and GRU cells (forward and backward) and
// the additive attention score v^T tanh(uh + wq). autograd/ops_rnn.cpp wraps them as tape ops.
// Like the CPU kernels (ops/cpu/cpu_kernels.h) they are SIMD code compiled once per ISA copy
// (autograd/rnn_loops.cpp in namespaces graft::rnn_loops::baseline / avx2 / avx512), and get<T>()
// returns the copy matching cpu_isa().
#pragma once
#include <array>
#include <cstdint>

#include "autograd/fuse_multi.h"

namespace graft::rnn_loops {

using fuse_multi::Block;
using fuse_multi::CBlock;

template <class T> struct Loops {
  // in: i, f, g, o (pre-activations), c_prev; out: sigma(i), sigma(f), tanh(g), sigma(o), c,
  // tanh(c), h (null blocks are not stored). Rows B, columns H.
  void (*lstm_forward)(const std::array<CBlock<T>, 5>& in, const std::array<Block<T>, 7>& out,
                       int64_t B, int64_t H);
  // in: the saved sigma(i), sigma(f), tanh(g), sigma(o), tanh(c), c_prev, dh, dc;
  // out: (dc', unused), d i, d f, d g, d o, d c_prev.
  void (*lstm_backward)(const std::array<CBlock<T>, 8>& in, const std::array<Block<T>, 6>& out,
                        int64_t B, int64_t H);
  // in: gi_r, gi_z, gi_n, gh_r, gh_z, gh_n, h_prev; out: r, z, n, h.
  void (*gru_forward)(const std::array<CBlock<T>, 7>& in, const std::array<Block<T>, 4>& out,
                      int64_t B, int64_t H);
  // in: the saved r, z, n, gh_n, h_prev, dy; out: d gi_n, d gi_r, d gi_z, d gh_n, d h_prev,
  // d gh_r, d gh_z.
  void (*gru_backward)(const std::array<CBlock<T>, 6>& in, const std::array<Block<T>, 7>& out,
                       int64_t B, int64_t H);
  // uh [B, S, A], wq [B, A], v [A] -> t = tanh(uh + wq) [B, S, A] (if non-null), e [B, S].
  void (*score_forward)(const T* uh, const T* wq, const T* v, T* t, T* e, int64_t B, int64_t S,
                        int64_t A);
  // d uh = de v (1 - t^2) [B, S, A] (if non-null), d wq = sum_s d uh [B, A].
  void (*score_backward)(const T* t, const T* de, const T* v, T* duh, T* dwq, int64_t B,
                         int64_t S, int64_t A);
};

// The copy of cpu_isa() (float and double).
template <class T> const Loops<T>& get();

}  // namespace graft::rnn_loops
